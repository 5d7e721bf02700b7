//! A loopback fault injector: an HTTP/1.1 proxy in front of a real server (SeaweedFS, nginx)
//! that forwards each request and, on command, answers the next GET (or PUT) requests with a fault
//! instead: `503 SlowDown`, a reset connection, a body cut short, a delay, or a test's own
//! action before forwarding. It injects faults into the real protocol; it imitates nothing.
//!
//! Each client connection carries one request: the proxy forwards it with `Connection: close`,
//! so the server's answer ends with the connection and the client opens a new one for the next.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the proxy does to one GET request.
pub enum Fault {
    /// Answers `503 Slow Down` with S3's `SlowDown` error body.
    SlowDown,
    /// Answers `403 Forbidden` with S3's `AccessDenied` error body (a permanent failure).
    Forbidden,
    /// Reads the request, then resets the connection (RST, no answer).
    Reset,
    /// Forwards the request, then passes the answer's head and only this many body bytes.
    CutBodyAfter(usize),
    /// Waits this long, then forwards.
    Delay(Duration),
    /// Runs the action (e.g. replaces the object), then forwards.
    Run(Box<dyn FnOnce() + Send>),
}

/// A request as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    /// The `Range` header, if any (`bytes=A-B`).
    pub range: Option<String>,
    /// For a GET, how many other GETs were in flight when it arrived.
    pub gets_in_flight: usize,
}

#[derive(Default)]
struct Shared {
    faults: VecDeque<Fault>,
    put_faults: VecDeque<Fault>,
    seen: Vec<SeenRequest>,
    /// Waited before forwarding every GET that has no fault of its own.
    get_delay: Option<Duration>,
    /// GETs being answered now, and the most there were at once.
    gets_in_flight: usize,
    peak_gets_in_flight: usize,
}

pub struct FaultProxy {
    address: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy on a free loopback port in front of `upstream` (`http://host:port`).
    pub fn start(upstream: &str) -> FaultProxy {
        FaultProxy::start_at("127.0.0.1:0".parse().unwrap(), upstream)
    }

    /// A proxy on `address` (one that an earlier proxy left: a server started again).
    pub fn start_at(address: SocketAddr, upstream: &str) -> FaultProxy {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .expect("upstream is http://IP:PORT");
        let listener = TcpListener::bind(address).unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let shared = shared.clone();
                            std::thread::spawn(move || {
                                let _ = serve(client, upstream, &shared);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        FaultProxy {
            address,
            shared,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Applies these faults to the next GET requests, one each, in order.
    pub fn inject(&self, faults: impl IntoIterator<Item = Fault>) {
        self.shared.lock().unwrap().faults.extend(faults);
    }

    /// Applies these faults to the next PUT requests (uploads and their parts), one each.
    pub fn inject_puts(&self, faults: impl IntoIterator<Item = Fault>) {
        self.shared.lock().unwrap().put_faults.extend(faults);
    }

    /// Waits `delay` before forwarding each GET (a slow server: requests made at once overlap).
    pub fn delay_every_get(&self, delay: Duration) {
        self.shared.lock().unwrap().get_delay = Some(delay);
    }

    /// The GET faults injected and not yet applied.
    pub fn faults_left(&self) -> usize {
        self.shared.lock().unwrap().faults.len()
    }

    /// The most GET requests answered at once so far.
    pub fn peak_gets_in_flight(&self) -> usize {
        self.shared.lock().unwrap().peak_gets_in_flight
    }

    /// The GET requests seen so far.
    pub fn gets(&self) -> Vec<SeenRequest> {
        self.requests("GET")
    }

    /// Waits until `count` requests of this method were seen; panics after two minutes.
    pub fn wait_for(&self, method: &str, count: usize) {
        let started = std::time::Instant::now();
        while self.requests(method).len() < count {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "fewer than {count} {method} requests in two minutes"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The requests of this method seen so far.
    pub fn requests(&self, method: &str) -> Vec<SeenRequest> {
        let shared = self.shared.lock().unwrap();
        shared
            .seen
            .iter()
            .filter(|r| r.method == method)
            .cloned()
            .collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn serve(client: TcpStream, upstream: SocketAddr, shared: &Mutex<Shared>) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        lines.push(line.trim_end().to_string());
    }
    let mut parts = lines[0].split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let header = |name: &str| {
        lines[1..].iter().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    };
    let body_len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; body_len];
    reader.read_exact(&mut body)?;
    let (fault, _in_flight) = {
        let mut state = shared.lock().unwrap();
        let gets_in_flight = state.gets_in_flight;
        state.seen.push(SeenRequest {
            method: method.clone(),
            path,
            range: header("range"),
            gets_in_flight,
        });
        match method.as_str() {
            "GET" => {
                state.gets_in_flight += 1;
                state.peak_gets_in_flight = state.peak_gets_in_flight.max(state.gets_in_flight);
                let fault = state.faults.pop_front();
                let fault = fault.or(state.get_delay.map(Fault::Delay));
                (fault, Some(GetInFlight(shared)))
            }
            "PUT" => (state.put_faults.pop_front(), None),
            _ => (None, None),
        }
    };
    let mut client = client;
    let mut cut_after = None;
    match fault {
        Some(Fault::SlowDown) => {
            return s3_error(
                &mut client,
                "503 Slow Down",
                "SlowDown",
                "Please reduce your request rate.",
            )
        }
        Some(Fault::Forbidden) => {
            return s3_error(
                &mut client,
                "403 Forbidden",
                "AccessDenied",
                "Access Denied",
            )
        }
        Some(Fault::Reset) => {
            reset(&client);
            return Ok(());
        }
        Some(Fault::Delay(wait)) => std::thread::sleep(wait),
        Some(Fault::Run(action)) => action(),
        Some(Fault::CutBodyAfter(n)) => cut_after = Some(n),
        None => {}
    }
    let mut server = TcpStream::connect(upstream)?;
    let mut head = format!("{}\r\n", lines[0]);
    for line in &lines[1..] {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            head.push_str(line);
            head.push_str("\r\n");
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    server.write_all(head.as_bytes())?;
    server.write_all(&body)?;
    match cut_after {
        None => {
            std::io::copy(&mut server, &mut client)?;
        }
        Some(n) => {
            // The answer's head, then n bytes of its body, then the end of the connection.
            let mut answer = Vec::new();
            let mut piece = [0u8; 8192];
            let head_end = loop {
                if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                let got = server.read(&mut piece)?;
                if got == 0 {
                    break answer.len();
                }
                answer.extend_from_slice(&piece[..got]);
            };
            while answer.len() < head_end + n {
                let got = server.read(&mut piece)?;
                if got == 0 {
                    break;
                }
                answer.extend_from_slice(&piece[..got]);
            }
            client.write_all(&answer[..answer.len().min(head_end + n)])?;
        }
    }
    client.flush()?;
    Ok(())
}

/// A GET being answered: counted in flight until dropped.
struct GetInFlight<'a>(&'a Mutex<Shared>);

impl Drop for GetInFlight<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap().gets_in_flight -= 1;
    }
}

/// Answers with `status` and S3's error body of `code`.
fn s3_error(
    client: &mut TcpStream,
    status: &str,
    code: &str,
    message: &str,
) -> std::io::Result<()> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{message}</Message></Error>"
    );
    write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Closes `stream` with a TCP reset (SO_LINGER of zero).
fn reset(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
