//! The floor under `tcpwhy watch`: packets read from an interface and
//! counted, nothing analysed, by the two ways the issue named: libpcap
//! (loaded at run time by `watch`'s own libpcap.rs, as `watch` reads) and
//! a TPACKET_V3 ring of our own
//! (AF_PACKET, PACKET_RX_RING, mmap; what libpcap does inside). Both keep
//! 256 bytes of each packet (libpcap by its snaplen, ours by a one-line
//! classic BPF program returning 256) in a ring of the same size.
//! bench/watch.sh drains a full ring with each and with `watch`.
//!
//! Usage (root): capture_floor pcap|tpacket IFACE RING_MIB
//! Stops on SIGINT; prints "<packets> packets, <dropped> dropped".

use std::sync::atomic::{AtomicBool, Ordering};

#[allow(dead_code)]
#[path = "../src/watch/libpcap.rs"]
mod libpcap;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_int(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

const SNAPLEN: u32 = 256;
const BLOCK_SIZE: u32 = 1 << 22;
const FRAME_SIZE: u32 = 2048;
/// A block is handed over when full or after this long: long enough that
/// a block fills at the bench's rates (a 4 MiB block holds about 17,000
/// of its packets), so a stopped reader's ring is not spent on part-filled
/// blocks.
const BLOCK_TIMEOUT_MS: u32 = 100;
const TP_STATUS_USER: u32 = 1;
const TPACKET_V3: libc::c_int = 2;

#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// `struct tpacket_block_desc` with its `tpacket_hdr_v1` (linux/if_packet.h).
#[repr(C)]
struct BlockDesc {
    version: u32,
    offset_to_priv: u32,
    block_status: u32,
    num_pkts: u32,
    offset_to_first_pkt: u32,
    blk_len: u32,
}

/// The start of `struct tpacket3_hdr`.
#[repr(C)]
struct Tpacket3Hdr {
    next_offset: u32,
    sec: u32,
    nsec: u32,
    snaplen: u32,
    len: u32,
    status: u32,
    mac: u16,
    net: u16,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: capture_floor pcap|tpacket IFACE RING_MIB");
        std::process::exit(2);
    }
    let mib: u32 = args[3].parse().expect("RING_MIB");
    unsafe {
        libc::signal(libc::SIGINT, on_int as *const () as libc::sighandler_t);
    }
    let (n, dropped) = match args[1].as_str() {
        "pcap" => with_pcap(&args[2], mib),
        "tpacket" => with_tpacket(&args[2], mib),
        m => panic!("unknown mode {m}"),
    };
    eprintln!("{n} packets, {dropped} dropped");
}

fn with_pcap(iface: &str, mib: u32) -> (u64, u64) {
    let lib = libpcap::load().unwrap_or_else(|e| panic!("{e}"));
    let mut cap = libpcap::Capture::create(lib, iface).unwrap();
    cap.set_promisc(true);
    cap.set_snaplen(SNAPLEN as i32);
    cap.set_immediate_mode(true);
    cap.set_buffer_size((mib << 20) as i32);
    cap.set_nanosecond_precision();
    cap.activate().unwrap();
    cap.set_nonblock().unwrap();
    let fd = cap.selectable_fd();
    eprintln!("listening on {iface}");
    let mut n = 0u64;
    let mut sum = 0u64;
    while !STOP.load(Ordering::Relaxed) {
        match cap.next_packet() {
            libpcap::Next::Packet(p) => {
                n += 1;
                sum = sum.wrapping_add(p.data[0] as u64 + p.len as u64);
            }
            libpcap::Next::Timeout => {
                let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                unsafe { libc::poll(&mut p, 1, 100) };
            }
            libpcap::Next::Error(e) => panic!("{e}"),
            libpcap::Next::End => break,
        }
    }
    std::hint::black_box(sum);
    let s = cap.stats().unwrap();
    (n, s.dropped as u64)
}

fn with_tpacket(iface: &str, mib: u32) -> (u64, u64) {
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (libc::ETH_P_ALL as u16).to_be() as i32);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let v: libc::c_int = TPACKET_V3;
        let r = libc::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &v as *const _ as *const libc::c_void, 4);
        assert_eq!(r, 0, "PACKET_VERSION: {}", std::io::Error::last_os_error());
        // The snaplen: a classic BPF program that accepts 256 bytes of each packet.
        let prog = [libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: SNAPLEN }];
        let fprog = libc::sock_fprog { len: 1, filter: prog.as_ptr() as *mut _ };
        let r = libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog as *const _ as *const libc::c_void, std::mem::size_of::<libc::sock_fprog>() as u32);
        assert_eq!(r, 0, "SO_ATTACH_FILTER: {}", std::io::Error::last_os_error());
        let blocks = ((mib << 20) / BLOCK_SIZE).max(1);
        let req = TpacketReq3 {
            block_size: BLOCK_SIZE,
            block_nr: blocks,
            frame_size: FRAME_SIZE,
            frame_nr: BLOCK_SIZE / FRAME_SIZE * blocks,
            retire_blk_tov: BLOCK_TIMEOUT_MS,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        let r = libc::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req as *const _ as *const libc::c_void, std::mem::size_of::<TpacketReq3>() as u32);
        assert_eq!(r, 0, "PACKET_RX_RING: {}", std::io::Error::last_os_error());
        let len = (BLOCK_SIZE * blocks) as usize;
        let map = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_LOCKED, fd, 0);
        assert_ne!(map, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        let name = std::ffi::CString::new(iface).unwrap();
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
        let r = libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32);
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        let mut mreq: libc::packet_mreq = std::mem::zeroed();
        mreq.mr_ifindex = sll.sll_ifindex;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        libc::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq as *const _ as *const libc::c_void, std::mem::size_of::<libc::packet_mreq>() as u32);
        eprintln!("listening on {iface}");
        let (mut n, mut sum, mut b) = (0u64, 0u64, 0u32);
        while !STOP.load(Ordering::Relaxed) {
            let block = (map as *mut u8).add((b * BLOCK_SIZE) as usize);
            let desc = block as *mut BlockDesc;
            if std::ptr::read_volatile(&(*desc).block_status) & TP_STATUS_USER == 0 {
                let mut p = libc::pollfd { fd, events: libc::POLLIN | libc::POLLERR, revents: 0 };
                libc::poll(&mut p, 1, 100);
                continue;
            }
            std::sync::atomic::fence(Ordering::Acquire);
            let mut pkt = block.add((*desc).offset_to_first_pkt as usize);
            for _ in 0..(*desc).num_pkts {
                let h = pkt as *const Tpacket3Hdr;
                let data = pkt.add((*h).mac as usize);
                sum = sum.wrapping_add(*data as u64 + (*h).len as u64 + (*h).snaplen as u64 + (*h).sec as u64 + (*h).nsec as u64 + (*h).status as u64 + (*h).net as u64);
                n += 1;
                pkt = pkt.add((*h).next_offset as usize);
            }
            std::sync::atomic::fence(Ordering::Release);
            std::ptr::write_volatile(&mut (*desc).block_status, 0);
            b = (b + 1) % blocks;
        }
        std::hint::black_box(sum);
        // struct tpacket_stats_v3 { packets, drops, freeze_q_cnt }
        let mut st = [0u32; 3];
        let mut sl: libc::socklen_t = 12;
        libc::getsockopt(fd, libc::SOL_PACKET, libc::PACKET_STATISTICS, st.as_mut_ptr() as *mut libc::c_void, &mut sl);
        (n, st[1] as u64)
    }
}
