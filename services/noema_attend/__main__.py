"""Entry point of the attend worker: ``python -m noema_attend``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build)
