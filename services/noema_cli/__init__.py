"""``noemactl``: the operator CLI."""
