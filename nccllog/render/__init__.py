"""nccllog.render"""
