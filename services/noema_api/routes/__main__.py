"""``python -m noema_api.routes`` (``make openapi``): write the API's OpenAPI document."""

from . import main

raise SystemExit(main())
