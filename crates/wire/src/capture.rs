//! Reading capture files: pcap and pcapng, plain or gzip/xz/zstd-compressed,
//! from a path or stdin, in bounded memory.

use crate::link::LinkType;
use pcap_parser::pcapng::Block;
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{create_reader, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// One captured frame, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// 1-based frame number, as Wireshark and tcpdump count.
    pub number: u64,
    /// Capture timestamp, nanoseconds since the Unix epoch.
    pub time_ns: i64,
    pub link: LinkType,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    /// Captured bytes (at most the snaplen).
    pub data: &'a [u8],
    /// Length of the frame on the wire.
    pub orig_len: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap { nanosecond: bool, big_endian: bool },
    PcapNg,
    /// Packets read from a live interface (`tcpwhy watch`): no file; its
    /// drop counters are the kernel's (pcap_stats).
    Live,
}

impl CaptureFormat {
    /// The format as every output names it: `pcap`, `pcap-ns` (nanosecond
    /// timestamps), `pcapng`, `live`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormat::PcapNg => "pcapng",
            CaptureFormat::Live => "live",
            CaptureFormat::Pcap { nanosecond: true, .. } => "pcap-ns",
            CaptureFormat::Pcap { .. } => "pcap",
        }
    }
}

/// Why reading stopped early, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{path}: cannot open: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("{path}: not a pcap or pcapng file{detail}")]
    NotACapture { path: PathBuf, detail: String },
    #[error("{path}: file ends in the middle of a record after frame {frames} (truncated capture); results cover the frames before it")]
    Truncated { path: PathBuf, frames: u64 },
    #[error(
        "{path}: corrupt data after frame {frames}: {detail}; results cover the frames before it"
    )]
    Corrupt {
        path: PathBuf,
        frames: u64,
        detail: String,
    },
}

impl CaptureError {
    /// Adds `delta` to the frame number the error is after (a stretch of
    /// a capture read with provisional numbers, `tcpwhy_flow`'s split in
    /// time).
    pub fn renumber(&mut self, delta: i64) {
        if let CaptureError::Truncated { frames, .. } | CaptureError::Corrupt { frames, .. } = self {
            *frames = (*frames as i64 + delta) as u64;
        }
    }

    /// True if frames were read before the problem (partial results exist).
    pub fn is_partial(&self) -> bool {
        matches!(
            self,
            CaptureError::Truncated { .. } | CaptureError::Corrupt { .. }
        )
    }
}

/// What a finished read saw.
#[derive(Debug)]
pub struct CaptureSummary {
    pub frames: u64,
    pub format: CaptureFormat,
    pub compression: Option<&'static str>,
    /// Frames whose link type tcpwhy does not decode, by link type number.
    pub unsupported_links: Vec<(i32, u64)>,
    /// Set when reading stopped before the end of the file.
    pub error: Option<CaptureError>,
    /// Packets the capturing interface or the OS dropped, from the pcapng
    /// interface statistics blocks (`isb_ifdrop` + `isb_osdrop`, the last
    /// block of each interface: the counters run from the capture's
    /// start). `None` when the file carries no such counter.
    pub interface_drops: Option<u64>,
}

/// Bytes consumed from the underlying file (compressed bytes for compressed
/// input), for progress reporting from another thread.
#[derive(Clone, Default)]
pub struct ReadProgress(Arc<AtomicU64>);

impl ReadProgress {
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Turns a decompression error into end of input, keeping the error for
/// the final report, so that pcap-parser sees a truncated file and every
/// frame decoded before the damage is kept. Reads are capped so that a
/// decoder hitting damage returns the good bytes first.
struct TolerantReader<R> {
    inner: R,
    error: Arc<std::sync::Mutex<Option<io::Error>>>,
}

impl<R: Read> Read for TolerantReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let cap = buf.len().min(64 << 10);
        match self.inner.read(&mut buf[..cap]) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                if let Ok(mut slot) = self.error.lock() {
                    slot.get_or_insert(e);
                }
                Ok(0)
            }
        }
    }
}

struct CountingReader<R> {
    inner: R,
    count: ReadProgress,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.0.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Capture times are clamped to [0, 2^62] ns (until the year 2116), so that
/// the difference of any two never overflows; a corrupt timestamp cannot
/// make arithmetic downstream misbehave (found by cargo fuzz).
const MAX_TIME_NS: i128 = 1 << 62;

#[inline]
fn clamp_time(ns: i128) -> i64 {
    ns.clamp(0, MAX_TIME_NS) as i64
}

/// Largest single record accepted. Real frames are at most a few hundred
/// KiB (BIG TCP); a larger length field is corruption, and refusing it keeps
/// memory bounded.
const MAX_RECORD_BYTES: usize = 16 << 20;
const INITIAL_BUFFER_BYTES: usize = 1 << 20;

struct Interface {
    link: LinkType,
    /// Timestamp units per second.
    units_per_sec: u64,
    offset_sec: i64,
}

/// A streaming reader over one capture.
pub struct CaptureReader {
    path: PathBuf,
    source: Source,
    format: CaptureFormat,
    compression: Option<&'static str>,
    progress: ReadProgress,
    total_bytes: Option<u64>,
    stream_error: Arc<std::sync::Mutex<Option<io::Error>>>,
    /// Map pages ahead on a helper thread (`map_ahead`).
    map_ahead: bool,
}

enum Source {
    /// pcap-parser over a byte stream: pcapng, compressed input, stdin.
    Stream(Box<dyn PcapReaderIterator + Send>),
    /// A plain classic pcap file, memory-mapped and walked record by record.
    /// Measured: about 1.5x faster than the streaming reader on a
    /// snaplen-128 capture and far more on full packets, whose payload pages
    /// are then never copied (see bench/).
    MappedPcap {
        map: memmap2::Mmap,
        big_endian: bool,
        nanosecond: bool,
        link: LinkType,
    },
}

/// Mapped pages behind the read position are dropped every this many bytes,
/// so resident memory stays bounded whatever the file size.
const RELEASE_EVERY_BYTES: usize = 2 << 20;
/// How far ahead of the read position a helper thread maps the file's pages
/// ([`CaptureReader::map_ahead`]): the page-table work (a quarter of the
/// time on full-size packets) then happens beside the reading. Mapped pages
/// count as resident memory, so this is small: 8 MiB are more than a
/// millisecond of reading at any speed measured.
const MAP_AHEAD_BYTES: usize = 8 << 20;

/// Classic pcap magic numbers: (big-endian file, nanosecond timestamps).
fn classic_pcap_magic(head: &[u8]) -> Option<(bool, bool)> {
    match head.get(..4)? {
        [0xd4, 0xc3, 0xb2, 0xa1] => Some((false, false)),
        [0x4d, 0x3c, 0xb2, 0xa1] => Some((false, true)),
        [0xa1, 0xb2, 0xc3, 0xd4] => Some((true, false)),
        [0xa1, 0xb2, 0x3c, 0x4d] => Some((true, true)),
        _ => None,
    }
}

fn try_map(path: &Path) -> Option<(memmap2::Mmap, u64)> {
    let file = File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() < 24 {
        return None;
    }
    // Safety: the mapping is read-only and private; a file truncated by
    // another process while mapped would fault, which tcpdump-written
    // captures being appended to do not do (they only grow).
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let _ = map.advise(memmap2::Advice::Sequential);
    Some((map, meta.len()))
}

fn sniff_compression(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0x1f, 0x8b]) {
        Some("gzip")
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        Some("xz")
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some("zstd")
    } else {
        None
    }
}

impl CaptureReader {
    /// Opens a capture file; `-` reads standard input. Compression is
    /// recognised by its magic bytes, not by the file name.
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let progress = ReadProgress::default();
        if path.as_os_str() != "-" {
            if let Some((map, len)) = try_map(path) {
                if let Some((big_endian, nanosecond)) = classic_pcap_magic(&map) {
                    let raw = [map[20], map[21], map[22], map[23]];
                    let network = if big_endian {
                        u32::from_be_bytes(raw)
                    } else {
                        u32::from_le_bytes(raw)
                    };
                    // The link type is the low 16 bits; the rest may carry FCS length.
                    let link = LinkType::from_linktype((network & 0xffff) as i32);
                    return Ok(CaptureReader {
                        path: path.to_owned(),
                        source: Source::MappedPcap {
                            map,
                            big_endian,
                            nanosecond,
                            link,
                        },
                        format: CaptureFormat::Pcap {
                            nanosecond,
                            big_endian,
                        },
                        compression: None,
                        progress,
                        total_bytes: Some(len),
                        stream_error: Arc::new(std::sync::Mutex::new(None)),
                        map_ahead: false,
                    });
                }
            }
        }
        let open_err = |source| CaptureError::Open {
            path: path.to_owned(),
            source,
        };
        let (raw, total_bytes): (Box<dyn Read + Send>, Option<u64>) = if path.as_os_str() == "-" {
            (Box::new(io::stdin()), None)
        } else {
            let file = File::open(path).map_err(open_err)?;
            let len = file
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            (Box::new(file), len)
        };
        Self::from_stream(path, raw, total_bytes, progress)
    }

    /// Reads a capture from any byte stream (`name` is used in messages).
    /// Compression is recognised by its magic bytes.
    pub fn from_reader(
        name: &Path,
        input: Box<dyn Read + Send>,
    ) -> Result<CaptureReader, CaptureError> {
        Self::from_stream(name, input, None, ReadProgress::default())
    }

    fn from_stream(
        path: &Path,
        raw: Box<dyn Read + Send>,
        total_bytes: Option<u64>,
        progress: ReadProgress,
    ) -> Result<CaptureReader, CaptureError> {
        let open_err = |source| CaptureError::Open {
            path: path.to_owned(),
            source,
        };
        let mut buffered = BufReader::with_capacity(
            256 << 10,
            CountingReader {
                inner: raw,
                count: progress.clone(),
            },
        );
        let head = buffered.fill_buf().map_err(open_err)?;
        let compression = sniff_compression(head);
        let stream_error = Arc::new(std::sync::Mutex::new(None));
        let decoded: Box<dyn Read + Send> = match compression {
            Some("gzip") => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
            Some("xz") => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(buffered)),
            Some("zstd") => {
                Box::new(zstd::stream::read::Decoder::with_buffer(buffered).map_err(open_err)?)
            }
            _ => Box::new(buffered),
        };
        let decoded = TolerantReader {
            inner: decoded,
            error: stream_error.clone(),
        };
        let not_capture = |detail: &str| CaptureError::NotACapture {
            path: path.to_owned(),
            detail: detail.to_string(),
        };
        let reader = match create_reader(INITIAL_BUFFER_BYTES, decoded) {
            Ok(r) => r,
            Err(PcapError::Eof) => {
                let damaged = stream_error.lock().ok().and_then(|mut e| e.take());
                return Err(match damaged {
                    Some(e) => not_capture(&format!(
                        " (the {} stream could not be read: {e})",
                        compression.unwrap_or("input")
                    )),
                    None => not_capture(" (empty input)"),
                });
            }
            Err(PcapError::ReadError) => {
                return Err(not_capture(" (the compressed stream could not be read)"))
            }
            Err(PcapError::Incomplete(_)) => {
                return Err(not_capture(" (too short for a file header)"))
            }
            Err(_) => return Err(not_capture(" (unknown magic number)")),
        };
        let format = if reader.data().len() >= 4 && is_pcapng_magic(reader.data()) {
            CaptureFormat::PcapNg
        } else {
            let magic = reader
                .data()
                .get(..4)
                .map(|m| [m[0], m[1], m[2], m[3]])
                .unwrap_or_default();
            let be = u32::from_be_bytes(magic);
            CaptureFormat::Pcap {
                nanosecond: be == 0xa1b2_3c4d || be == 0x4d3c_b2a1,
                big_endian: be == 0xa1b2_c3d4 || be == 0xa1b2_3c4d,
            }
        };
        Ok(CaptureReader {
            path: path.to_owned(),
            source: Source::Stream(reader),
            format,
            compression,
            progress,
            total_bytes,
            stream_error,
            map_ahead: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file on disk, when known (not for stdin).
    pub fn total_bytes(&self) -> Option<u64> {
        self.total_bytes
    }

    /// With a core to spare: while a mapped pcap file is read, a helper
    /// thread maps its pages ahead of the reader ([`MAP_AHEAD_BYTES`]), so
    /// that the reading thread does not stop at each page it touches first.
    /// The frames and their order are the same. No effect on other inputs.
    pub fn map_ahead(mut self, on: bool) -> Self {
        self.map_ahead = on;
        self
    }

    pub fn progress(&self) -> ReadProgress {
        self.progress.clone()
    }

    /// Calls `on_frame` for every frame in file order. Never panics on bad
    /// input: reading stops at the first corrupt or truncated record, and the
    /// summary's `error` says where.
    pub fn for_each_frame(self, on_frame: impl FnMut(&Frame<'_>)) -> CaptureSummary {
        match self.source {
            Source::MappedPcap {
                ref map,
                big_endian,
                nanosecond,
                link,
            } => {
                let (frames, error) = mapped_frames(
                    &self.path,
                    map,
                    self.map_ahead,
                    big_endian,
                    nanosecond,
                    link,
                    &self.progress,
                    on_frame,
                );
                let unsupported = match link {
                    LinkType::Other(n) if frames > 0 => vec![(n, frames)],
                    _ => Vec::new(),
                };
                CaptureSummary {
                    frames,
                    format: self.format,
                    compression: None,
                    unsupported_links: unsupported,
                    error,
                    interface_drops: None,
                }
            }
            Source::Stream(_) => self.stream_frames(on_frame),
        }
    }

    fn stream_frames(mut self, mut on_frame: impl FnMut(&Frame<'_>)) -> CaptureSummary {
        let Source::Stream(reader) = &mut self.source else {
            unreachable!("stream source")
        };
        let mut st = StreamState::default();
        let path = self.path.clone();
        let corrupt = |frames: u64, detail: String| CaptureError::Corrupt {
            path: path.clone(),
            frames,
            detail,
        };
        let error = loop {
            match reader.next() {
                Ok((offset, block)) => {
                    if let Err(detail) = st.block(block, &mut on_frame) {
                        break Some(corrupt(st.frames, detail));
                    }
                    reader.consume(offset);
                }
                Err(PcapError::Eof) => break None,
                Err(PcapError::Incomplete(_)) => {
                    if reader.refill().is_err() {
                        break Some(corrupt(
                            st.frames,
                            "read error (compressed stream damaged?)".into(),
                        ));
                    }
                }
                Err(PcapError::BufferTooSmall) => {
                    let size = reader.data().len().max(INITIAL_BUFFER_BYTES) * 2;
                    if size > MAX_RECORD_BYTES * 2 || !reader.grow(size) {
                        break Some(corrupt(
                            st.frames,
                            format!("record larger than {} MiB", MAX_RECORD_BYTES >> 20),
                        ));
                    }
                    if reader.refill().is_err() {
                        break Some(corrupt(
                            st.frames,
                            "read error (compressed stream damaged?)".into(),
                        ));
                    }
                }
                Err(PcapError::UnexpectedEof) => {
                    break Some(CaptureError::Truncated {
                        path: self.path.clone(),
                        frames: st.frames,
                    })
                }
                Err(PcapError::ReadError) => {
                    break Some(corrupt(
                        st.frames,
                        "read error (compressed stream damaged or truncated?)".into(),
                    ))
                }
                Err(e) => break Some(corrupt(st.frames, describe(&e))),
            }
        };
        let stream_error = self.stream_error.lock().ok().and_then(|mut e| e.take());
        let error = match (error, stream_error) {
            (Some(CaptureError::Truncated { .. }), Some(e)) | (None, Some(e)) => {
                Some(CaptureError::Corrupt {
                    path: self.path.clone(),
                    frames: st.frames,
                    detail: format!(
                        "the {} stream is damaged or cut short ({e})",
                        self.compression.unwrap_or("input")
                    ),
                })
            }
            (error, _) => error,
        };
        CaptureSummary {
            frames: st.frames,
            format: self.format,
            compression: self.compression,
            unsupported_links: st.unsupported,
            error,
            interface_drops: (!st.drops.is_empty()).then(|| st.drops.iter().map(|(_, d)| *d).sum()),
        }
    }
}

/// What a stream's blocks have said so far (pcap or pcapng, any number of
/// sections).
#[derive(Default)]
struct StreamState {
    frames: u64,
    interfaces: Vec<Interface>,
    /// A classic pcap's link type and time precision.
    legacy: Option<(LinkType, bool)>,
    last_time_ns: i64,
    unsupported: Vec<(i32, u64)>,
    /// (section, interface) -> drops so far
    drops: Vec<((u32, u32), u64)>,
    section: u32,
}

impl StreamState {
    /// One block: its frame, if it holds one, to `on_frame`; `Err` with
    /// what is wrong when the block contradicts the ones before it.
    #[inline]
    fn block(&mut self, block: PcapBlockOwned<'_>, on_frame: &mut impl FnMut(&Frame<'_>)) -> Result<(), String> {
        let mut emit = |frame: Frame<'_>, unsupported: &mut Vec<(i32, u64)>| {
            if let LinkType::Other(n) = frame.link {
                match unsupported.iter_mut().find(|(l, _)| *l == n) {
                    Some((_, c)) => *c += 1,
                    None => unsupported.push((n, 1)),
                }
            }
            on_frame(&frame);
        };
        match block {
            PcapBlockOwned::LegacyHeader(header) => {
                self.legacy = Some((
                    // Low 16 bits; the rest may carry the FCS length.
                    LinkType::from_linktype(header.network.0 & 0xffff),
                    header.is_nanosecond_precision(),
                ));
            }
            PcapBlockOwned::Legacy(record) => {
                let (link, nanos) = self.legacy.unwrap_or((LinkType::Ethernet, false));
                let fraction_ns = if nanos {
                    record.ts_usec as i128
                } else {
                    record.ts_usec as i128 * 1000
                };
                self.frames += 1;
                self.last_time_ns =
                    clamp_time(record.ts_sec as i128 * 1_000_000_000 + fraction_ns);
                let caplen = (record.caplen as usize).min(record.data.len());
                emit(
                    Frame {
                        number: self.frames,
                        time_ns: self.last_time_ns,
                        link,
                        interface: 0,
                        data: &record.data[..caplen],
                        orig_len: record.origlen.max(caplen as u32),
                    },
                    &mut self.unsupported,
                );
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                self.interfaces.clear();
                self.section += 1;
            }
            PcapBlockOwned::NG(Block::InterfaceStatistics(isb)) => {
                let ifdrop = isb.isb_ifdrop().and_then(|v| v.ok());
                let osdrop = isb.isb_osdrop().and_then(|v| v.ok());
                if ifdrop.is_some() || osdrop.is_some() {
                    let n = ifdrop.unwrap_or(0).saturating_add(osdrop.unwrap_or(0));
                    let key = (self.section, isb.if_id);
                    match self.drops.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, d)) => *d = n,
                        None => self.drops.push((key, n)),
                    }
                }
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                self.interfaces.push(Interface {
                    link: LinkType::from_linktype(idb.linktype.0),
                    units_per_sec: idb.ts_resolution().unwrap_or(1_000_000).max(1),
                    offset_sec: idb.ts_offset(),
                });
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let Some(iface) = self.interfaces.get(epb.if_id as usize) else {
                    let detail = format!(
                        "packet block names interface {} but only {} were described",
                        epb.if_id,
                        self.interfaces.len()
                    );
                    return Err(detail);
                };
                let ticks = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                let ns = ticks as i128 * 1_000_000_000 / iface.units_per_sec as i128;
                self.frames += 1;
                self.last_time_ns =
                    clamp_time(ns + iface.offset_sec as i128 * 1_000_000_000);
                let data = epb.packet_data();
                emit(
                    Frame {
                        number: self.frames,
                        time_ns: self.last_time_ns,
                        link: iface.link,
                        interface: epb.if_id,
                        data,
                        orig_len: epb.origlen.max(data.len() as u32),
                    },
                    &mut self.unsupported,
                );
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                let Some(iface) = self.interfaces.first() else {
                    return Err("simple packet block before any interface".into());
                };
                self.frames += 1;
                let data = spb.packet_data();
                emit(
                    Frame {
                        number: self.frames,
                        time_ns: self.last_time_ns,
                        link: iface.link,
                        interface: 0,
                        data,
                        orig_len: spb.origlen.max(data.len() as u32),
                    },
                    &mut self.unsupported,
                );
            }
            PcapBlockOwned::NG(_) => {}
        }
        Ok(())
    }
}

/// Walks the records of a mapped classic pcap file.
#[allow(clippy::too_many_arguments)]
fn mapped_frames(
    path: &Path,
    map: &memmap2::Mmap,
    map_ahead: bool,
    big_endian: bool,
    nanosecond: bool,
    link: LinkType,
    progress: &ReadProgress,
    on_frame: impl FnMut(&Frame<'_>),
) -> (u64, Option<CaptureError>) {
    let data: &[u8] = map;
    // Where the reader has got to (updated when pages are released), for
    // the thread that maps ahead; usize::MAX when reading has stopped.
    let reached = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let helper = (map_ahead && data.len() > MAP_AHEAD_BYTES)
            .then(|| scope.spawn(|| map_pages_ahead(map, &reached)).thread().clone());
        let stretch = Stretch { from: 24, first_number: 0, until: usize::MAX, until_number: u64::MAX, stop: None };
        let (frames, _, error) =
            read_mapped(path, data, map, big_endian, nanosecond, link, progress, (&reached, helper.as_ref()), stretch, on_frame);
        let result = (frames, error);
        reached.store(usize::MAX, Ordering::Relaxed);
        if let Some(h) = &helper {
            h.unpark();
        }
        result
    })
}

/// Maps the pages up to [`MAP_AHEAD_BYTES`] past the reader's position
/// (`MADV_POPULATE_READ`, Linux 5.14; where refused, the reader faults the
/// pages in itself as without this thread).
fn map_pages_ahead(map: &memmap2::Mmap, reached: &AtomicUsize) {
    #[cfg(not(target_os = "linux"))]
    let _ = (map, reached);
    #[cfg(target_os = "linux")]
    {
        let mut ahead = 0usize;
        loop {
            let at = reached.load(Ordering::Relaxed);
            if at == usize::MAX || ahead >= map.len() {
                return;
            }
            if ahead < at + MAP_AHEAD_BYTES {
                let from = ahead.max(at);
                let len = RELEASE_EVERY_BYTES.min(map.len() - from);
                if map.advise_range(memmap2::Advice::PopulateRead, from, len).is_err() {
                    return;
                }
                ahead = from + len;
                // The reader may have released pages past `from` meanwhile:
                // those just mapped again would stay mapped (resident) for
                // good. The reader releases only beyond `reached`, so this
                // thread releases what it mapped below it.
                let now = reached.load(Ordering::Relaxed).min(ahead);
                if now > from {
                    // Safety: pages below `reached` are behind the reader; no
                    // frame there is borrowed any more (as in `read_mapped`).
                    unsafe {
                        let _ = map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, now - from);
                    }
                }
            } else {
                // Far enough ahead: woken when the reader releases pages
                // (each `RELEASE_EVERY_BYTES`), so once per step rather than
                // on a timer (a wake-up every 100 us took a core from the
                // threads doing the work: `-j 2` had 1,100 context
                // switches on the snaplen-128 bench capture). The timeout
                // only bounds a missed wake-up.
                std::thread::park_timeout(std::time::Duration::from_millis(10));
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn read_mapped(
    path: &Path,
    data: &[u8],
    map: &memmap2::Mmap,
    big_endian: bool,
    nanosecond: bool,
    link: LinkType,
    progress: &ReadProgress,
    (reached, helper): (&AtomicUsize, Option<&std::thread::Thread>),
    stretch: Stretch<'_>,
    mut on_frame: impl FnMut(&Frame<'_>),
) -> (u64, usize, Option<CaptureError>) {
    // One 16-byte record header: (ts_sec, ts_fraction, caplen, orig_len).
    let header = |h: &[u8; 16]| {
        let w = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        (w(0), w(4), w(8), w(12))
    };
    let fraction_to_ns: i64 = if nanosecond { 1 } else { 1000 };
    let mut pos = stretch.from;
    let mut frames = stretch.first_number;
    let mut released = stretch.from & !4095;
    let error = loop {
        if pos == data.len() || pos >= stretch.until || frames >= stretch.until_number {
            break None;
        }
        let Some(h) = data.get(pos..pos + 16) else {
            break Some(CaptureError::Truncated {
                path: path.to_owned(),
                frames,
            });
        };
        let (ts_sec, ts_fraction, caplen, orig_len) = header(h.try_into().expect("16 bytes"));
        let (ts_sec, ts_fraction, caplen) = (ts_sec as i64, ts_fraction as i64, caplen as usize);
        if caplen > MAX_RECORD_BYTES {
            break Some(CaptureError::Corrupt {
                path: path.to_owned(),
                frames,
                detail: format!(
                    "record length {caplen} is larger than {} MiB",
                    MAX_RECORD_BYTES >> 20
                ),
            });
        }
        let start = pos + 16;
        let Some(frame_data) = data.get(start..start + caplen) else {
            break Some(CaptureError::Truncated {
                path: path.to_owned(),
                frames,
            });
        };
        frames += 1;
        prefetch_record(data, start + caplen);
        // Records of a bulk transfer mostly have one size: guess further.
        prefetch_record(data, start + caplen + 4 * (16 + caplen));
        prefetch_record(data, start + caplen + 8 * (16 + caplen));
        on_frame(&Frame {
            number: frames,
            time_ns: clamp_time((ts_sec * 1_000_000_000 + ts_fraction * fraction_to_ns) as i128),
            link,
            interface: 0,
            data: frame_data,
            orig_len: orig_len.max(caplen as u32),
        });
        pos = start + caplen;
        if pos - released >= RELEASE_EVERY_BYTES {
            let upto = pos & !4095;
            // Safety: the pages behind `pos` are not borrowed any more (frames
            // live only during the callback); they are re-read from the page
            // cache if touched again.
            unsafe {
                let _ = map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    released,
                    upto - released,
                );
            }
            released = upto;
            progress.0.store(pos as u64, Ordering::Relaxed);
            reached.store(upto, Ordering::Relaxed);
            if let Some(h) = helper {
                h.unpark();
            }
            if stretch.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                break None;
            }
        }
    };
    progress.0.store(pos as u64, Ordering::Relaxed);
    (frames, pos, error)
}

/// Record headers in a row that [`MappedPcap::resync`] asks for.
pub const RESYNC_CHAIN: usize = 32;

/// Where [`read_mapped`] starts and stops: from byte `from` (a record
/// boundary, whose record is frame `first_number + 1`) to the first record
/// starting at or after `until`, or earlier when `stop` is set (looked at
/// every [`RELEASE_EVERY_BYTES`]).
struct Stretch<'a> {
    from: usize,
    first_number: u64,
    until: usize,
    /// Or once this frame is read.
    until_number: u64,
    stop: Option<&'a std::sync::atomic::AtomicBool>,
}

/// A plain classic pcap file, memory-mapped: read in stretches by several
/// threads at once (a split in time, `tcpwhy_flow`).
pub struct MappedPcap<'a> {
    path: &'a Path,
    map: &'a memmap2::Mmap,
    big_endian: bool,
    nanosecond: bool,
    link: LinkType,
    progress: &'a ReadProgress,
}

/// A stretch read by [`MappedPcap::read`]: the number of its last frame,
/// the offset it stopped at, and why it stopped early.
pub struct StretchRead {
    pub last_number: u64,
    pub end: usize,
    pub error: Option<CaptureError>,
}

impl MappedPcap<'_> {
    /// The file's length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() <= 24
    }

    pub fn format(&self) -> CaptureFormat {
        CaptureFormat::Pcap { nanosecond: self.nanosecond, big_endian: self.big_endian }
    }

    pub fn link(&self) -> LinkType {
        self.link
    }

    /// The first record boundary at or after byte `target`, found without
    /// walking the records before it: the first position from which
    /// [`RESYNC_CHAIN`] record headers in a row are plausible (lengths not
    /// zero and within the file's snapshot length and each other,
    /// sub-second field in range, timestamps within a week of the first
    /// record's and an hour of each other: a run of zero bytes, as in many
    /// payloads, is not a chain of records), or which ends exactly at the
    /// end of the file. A position inside a record would
    /// need its payload to imitate that many headers; a caller that must
    /// be certain checks the position against a reader that walked to it
    /// (the split in time compares it with where the first thread stopped).
    pub fn resync(&self, target: usize) -> Option<usize> {
        let data: &[u8] = self.map;
        let word = |i: usize| {
            let b = [data[i], data[i + 1], data[i + 2], data[i + 3]];
            if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let snaplen = match word(16) as usize {
            0 => MAX_RECORD_BYTES,
            s => s.min(MAX_RECORD_BYTES),
        };
        let subsec_max = if self.nanosecond { 1_000_000_000 } else { 1_000_000 };
        if data.len() < 24 + 16 {
            return None;
        }
        let first_sec = word(24);
        let plausible_from = |start: usize| -> bool {
            let mut pos = start;
            let mut last_sec: Option<u32> = None;
            for _ in 0..RESYNC_CHAIN {
                if pos == data.len() {
                    return true;
                }
                if pos + 16 > data.len() {
                    return false;
                }
                let (sec, sub, caplen, orig) = (word(pos), word(pos + 4), word(pos + 8) as usize, word(pos + 12) as usize);
                if sub >= subsec_max
                    || caplen == 0
                    || caplen > snaplen
                    || orig < caplen
                    || orig > MAX_RECORD_BYTES
                    || pos + 16 + caplen > data.len()
                    || sec.abs_diff(first_sec) > 7 * 86_400
                {
                    return false;
                }
                if last_sec.is_some_and(|l| sec.abs_diff(l) > 3600) {
                    return false;
                }
                last_sec = Some(sec);
                pos += 16 + caplen;
            }
            true
        };
        (target.max(24)..data.len()).find(|&p| plausible_from(p))
    }

    /// Reads the records from byte `from` (a record boundary after
    /// `numbered` records) up to the first starting at or after byte
    /// `until.0` or numbered after `until.1`, or until `stop` is set: as
    /// [`CaptureReader::for_each_frame`], frame numbers counted from the
    /// start of the file.
    pub fn read(
        &self,
        (from, numbered): (usize, u64),
        until: (usize, u64),
        stop: Option<&std::sync::atomic::AtomicBool>,
        on_frame: impl FnMut(&Frame<'_>),
    ) -> StretchRead {
        let reached = AtomicUsize::new(0);
        let stretch = Stretch { from, first_number: numbered, until: until.0, until_number: until.1, stop };
        let (last_number, end, error) = read_mapped(
            self.path,
            self.map,
            self.map,
            self.big_endian,
            self.nanosecond,
            self.link,
            self.progress,
            (&reached, None),
            stretch,
            on_frame,
        );
        StretchRead { last_number, end, error }
    }
}

impl CaptureReader {
    /// The file as a [`MappedPcap`], when it is a plain classic pcap file
    /// (not compressed, not pcapng, not a stream).
    pub fn mapped(&self) -> Option<MappedPcap<'_>> {
        match &self.source {
            Source::MappedPcap { map, big_endian, nanosecond, link } => Some(MappedPcap {
                path: &self.path,
                map,
                big_endian: *big_endian,
                nanosecond: *nanosecond,
                link: *link,
                progress: &self.progress,
            }),
            Source::Stream(_) => None,
        }
    }
}

/// Asks the CPU to fetch the next record's header and the start of its
/// frame while the current frame is analysed. The records of a mapped file
/// are a chain (each header tells where the next one starts), so without
/// this every record waits a full memory round trip: on full-size packets,
/// where each record sits on a new page, that wait was most of the time.
#[inline(always)]
fn prefetch_record(data: &[u8], next: usize) {
    #[cfg(target_arch = "x86_64")]
    if next + 128 <= data.len() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // Safety: both addresses are inside `data`; a prefetch never faults.
        unsafe {
            let p = data.as_ptr().add(next) as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, next);
}

/// What a file's first bytes say it is, judged as [`CaptureReader::open`]
/// judges it (by content, not by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A pcap or pcapng file, plain or compressed (the compression named).
    Capture(Option<&'static str>),
    /// Compressed, but neither pcap nor pcapng inside (or the stream's start
    /// could not be decoded).
    CompressedOther(&'static str),
    /// Neither a capture nor compressed.
    Other,
}

/// Reads the first bytes of `path` (decompressing only those of a
/// gzip/xz/zstd stream) to tell whether it is a capture, without opening it
/// for reading: what a directory walk uses to pick the captures out.
pub fn sniff_capture(path: &Path) -> io::Result<Sniffed> {
    let mut input = BufReader::with_capacity(64 << 10, File::open(path)?);
    let head = input.fill_buf()?;
    let compression = sniff_compression(head);
    let mut decoded: Box<dyn Read> = match compression {
        Some("gzip") => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Some("xz") => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input)),
        Some("zstd") => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
        _ => Box::new(input),
    };
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        match decoded.read(&mut magic[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let capture = got == magic.len() && (classic_pcap_magic(&magic).is_some() || is_pcapng_magic(&magic));
    Ok(match (capture, compression) {
        (true, c) => Sniffed::Capture(c),
        (false, Some(c)) => Sniffed::CompressedOther(c),
        (false, None) => Sniffed::Other,
    })
}

fn is_pcapng_magic(data: &[u8]) -> bool {
    data[..4] == [0x0a, 0x0d, 0x0d, 0x0a]
}

fn describe(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::NomError(_, kind) => format!("unparseable block ({kind:?})"),
        PcapError::OwnedNomError(_, kind) => format!("unparseable block ({kind:?})"),
        PcapError::HeaderNotRecognized => "unrecognised section header".into(),
        other => format!("{other:?}"),
    }
}
