"""The forge side: one Forge interface (base.py), GitHub (github.py) and GitLab (gitlab.py)."""
