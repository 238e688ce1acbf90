"""The forge side: one package per forge (github/, gitlab/), each inbound and outbound,
listed in registry.py. Shared: the Forge interface and its types (base.py), what a
delivery amounts to (inbound.py), the ForgePlugin protocol (plugin.py)."""
