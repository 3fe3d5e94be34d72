"""Entry point of the embed worker: ``python -m noema_embed``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build, background=True)
