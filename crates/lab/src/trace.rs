//! The run's tcp_probe / tcp_retransmit_skb / tcp_cong_state_set recording,
//! written as JSON Lines. Tracepoints are global, so the events are
//! filtered by the run's own server port (unique per run).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use tcpwhy_kernel::{TcpProbe, TcpProbeOptions, TraceEvent};

pub struct Tracer {
    probe: TcpProbe,
    file: PathBuf,
}

impl Tracer {
    pub fn start(port: u16, file: &Path) -> io::Result<Tracer> {
        let _ = tcpwhy_kernel::tracefs::remove_stale_instances();
        let probe = TcpProbe::start(&TcpProbeOptions::port(port))?;
        Ok(Tracer { probe, file: file.to_path_buf() })
    }

    /// Stop tracing (the tracefs instance is removed) and write the events.
    pub fn stop(self) -> io::Result<Vec<TraceEvent>> {
        let events = self.probe.stop()?;
        let mut w = BufWriter::new(std::fs::File::create(&self.file)?);
        for e in &events {
            serde_json::to_writer(&mut w, e)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
        Ok(events)
    }
}
