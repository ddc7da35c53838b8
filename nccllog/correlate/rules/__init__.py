"""The diagnosis rules, one module per rule family; ``verdict`` ranks what they propose.

Every rule is a function ``(ctx: Context) -> list[Draft]`` (``base``); ``diagnose`` runs them in a
fixed order (reconciliation depends on it). Scores and thresholds are named in ``scores.toml``.
"""
