"""A network lab on one machine: hosts in network namespaces on a bridge, each with its own IPFS node and node
process, bandwidth limits (tbf), latency (a delaying proxy) and faults (partitions, kill -9, churn)."""
