"""Entry point of the projector: ``python -m noema_projector``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build)
