"""The agent-workspace benchmark's generator (bench.agent_workspace): the same seed writes the same
conversations, every question's evidence is a turn of its conversation that states the answer, and
a fact changed later is answered by the newer turn only."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.agent_workspace import main
from bench.recall import load, turns

from noema.domain.timewords import named_window


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


def test_a_dated_question_names_a_time_holding_its_incident_and_none_of_the_services_others(
    tmp_path: Path,
) -> None:
    _written(tmp_path, seed=3)
    asked = 0
    for _, conv in load([str(tmp_path)]):
        when = {dia_id: at for dia_id, _, _, at, _ in turns(conv) if at is not None}
        said = {dia_id: text for dia_id, _, text, at, _ in turns(conv) if at is not None}
        present = max(when.values())  # the newest session: what "last week" is read against
        for q in (q for q in conv["qa"] if q["category"] == 2 and not q["question"].startswith("When")):
            [evidence] = q["evidence"]
            service = re.search(r"(?:with|did) (\w+)", q["question"]).group(1)  # type: ignore[union-attr]
            incidents = {d for d, text in said.items() if text.startswith(f"Incident write-up: {service} ")}
            window = named_window(q["question"], present)
            assert window is not None, q
            assert len(incidents) == 3, q
            assert evidence in incidents, q
            assert [d for d in incidents if window.holds(when[d])] == [evidence], q
            asked += 1
    assert asked >= 12


def test_a_deploy_day_moved_twice_is_asked_for_each_move(tmp_path: Path) -> None:
    _written(tmp_path)
    for _, conv in load([str(tmp_path)]):
        decisions = [q for q in conv["qa"] if q["question"].startswith("When did we decide")]
        services = [q["question"].split("move ")[1].split()[0] for q in decisions]
        assert sorted(services.count(s) for s in set(services)) == [1, 1, 2, 2]
        assert len({q["evidence"][0] for q in decisions}) == len(decisions)
