"""nccllog.correlate"""
