"""The agent-workspace benchmark's generator (bench.agent_workspace): the same seed writes the same
conversations, every question's evidence is a turn of its conversation that states the answer, and
a fact changed later is answered by the newer turn only."""

from __future__ import annotations

import json
from pathlib import Path

from bench.agent_workspace import main
from bench.recall import load, turns


def _written(folder: Path, seed: int = 7) -> dict[str, bytes]:
    assert main([str(folder), "--workspaces", "2", "--seed", str(seed)]) == 0
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


def test_the_same_seed_writes_the_same_conversations_and_another_seed_others(tmp_path: Path) -> None:
    first = _written(tmp_path / "a")
    assert first == _written(tmp_path / "b")
    assert first != _written(tmp_path / "c", seed=8)


def test_every_answer_is_stated_by_its_evidence_turns_in_bench_recalls_reading(tmp_path: Path) -> None:
    _written(tmp_path)
    for _, conv in load([str(tmp_path)]):
        text = {dia_id: said for dia_id, _, said, when, _ in turns(conv) if when is not None}
        assert {q["category"] for q in conv["qa"]} == {1, 2, 3, 4}
        for q in conv["qa"]:
            assert q["evidence"], q
            assert all(e in text for e in q["evidence"]), q
            if q["category"] in (3, 4):  # one turn states the answer itself
                [evidence] = q["evidence"]
                assert str(q["answer"]) in text[evidence], q
            if q["category"] == 1:  # the second turn names the answer
                assert str(q["answer"]) in text[q["evidence"][1]], q


def test_a_changed_fact_is_answered_by_the_turn_that_changed_it(tmp_path: Path) -> None:
    _written(tmp_path)
    data = json.loads((tmp_path / "agents-1.json").read_text())
    said = {t["dia_id"]: t["text"] for k, v in data["conversation"].items() if k[-1].isdigit() for t in v}
    moves = {dia_id for dia_id, text in said.items() if text.startswith("Heads-up:")}
    assert len(moves) == 2
    ports = [q for q in data["qa"] if "port" in q["question"]]
    answered_by = {q["evidence"][0] for q in ports}
    assert moves <= answered_by  # the newer turn is the evidence, the older one is not
    for q in ports:
        if q["evidence"][0] in moves:
            assert f"moved to port {q['answer']} (it was" in said[q["evidence"][0]]
