"""gpu-tracker: dated GPU prices, workload sizing and GPU economics."""

__version__ = "0.1.0"
