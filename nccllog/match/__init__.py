"""nccllog.match"""
