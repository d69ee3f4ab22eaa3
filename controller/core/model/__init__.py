"""What the engine knows of the API objects: Kueue's ClusterQueues, LocalQueues, Cohorts,
ResourceFlavors, priority classes and Workloads converted into plain frozen data
(`from_api`), and the Kueue fields quotagate does not implement (`unsupported`)."""
