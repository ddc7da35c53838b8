"""nccllog.ingest"""
