"""Entry point of the decay worker: ``python -m noema_decay``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build, background=True)
