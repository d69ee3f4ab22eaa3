"""The one job framework (Kueue's `jobframework`): the `GenericJob` interface every job
integration implements, the registry of integrations by Kueue's framework name, and the
generic reconciler and webhook path they all run through."""
