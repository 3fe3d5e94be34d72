"""Entry point of the agent service: ``python -m noema_service``."""

from noema.runtime.worker import serve

from .service import build

if __name__ == "__main__":
    serve(build)
