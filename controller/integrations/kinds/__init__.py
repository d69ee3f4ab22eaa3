"""The integrations, one module per kind: each registers its `Framework` when imported
(`controller.integrations.framework.registry.frameworks()` imports every module here)."""
