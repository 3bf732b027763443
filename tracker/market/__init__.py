"""Market intelligence: the GPU price index, alerts, currencies (ECB rates) and FOCUS."""
