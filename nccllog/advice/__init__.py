"""nccllog.advice"""
