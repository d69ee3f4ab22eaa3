"""The ProvisioningRequest admission check: its rules (`requests`)."""
