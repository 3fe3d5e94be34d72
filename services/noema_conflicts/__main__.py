"""Entry point of the conflicts worker: ``python -m noema_conflicts``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build, background=True)
