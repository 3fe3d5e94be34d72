"""Entry point of the retrieve worker: ``python -m noema_retrieve``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build, background=True)
