"""Entry point of the conflicts worker: ``python -m noema_conflicts``."""

from noema.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build, background=True)
