//! Kernel evidence: sock_diag tcp_info sampling, tracefs tcp_probe, sysctl snapshots.
