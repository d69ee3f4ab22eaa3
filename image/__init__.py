"""quotagate's OCI image, built from Debian's and PyPI's packages (`make image`)."""
