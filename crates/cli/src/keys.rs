//! The keyboard while a request runs in the REPL: Esc or Ctrl-C interrupts
//! it, approval answers are read here (so Ctrl-C at a question cancels the
//! request instead of leaving a reader behind), and keys never echo as `^[`
//! or leak into the next prompt. Other typing is kept and put back into the
//! next prompt's line.
//!
//! Only when stdin is a terminal: the terminal goes to non-canonical mode
//! without echo or signals for the request, and is restored after.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

const ESC: u8 = 0x1b;
const CTRL_C: u8 = 0x03;
const BACKSPACE: u8 = 0x7f;
const CTRL_H: u8 = 0x08;

/// What the approver reads while a question is open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A line the user typed and ended with Enter.
    Line(String),
    /// Esc or Ctrl-C: the request is cancelled.
    Cancelled,
}

/// Answers typed at approval questions; shared by the REPL and its approver.
#[derive(Debug)]
pub(crate) struct Answers {
    /// True while a question waits for its answer.
    asking: AtomicBool,
    tx: UnboundedSender<Answer>,
    rx: tokio::sync::Mutex<UnboundedReceiver<Answer>>,
    /// True while a [`KeyWatch`] reads the keyboard.
    watching: AtomicBool,
    /// Told by the renderer when a question is on screen.
    pub shown: Arc<tokio::sync::Notify>,
}

impl Default for Answers {
    fn default() -> Self {
        let (tx, rx) = unbounded_channel();
        Answers {
            asking: AtomicBool::new(false),
            tx,
            rx: tokio::sync::Mutex::new(rx),
            watching: AtomicBool::new(false),
            shown: Arc::new(tokio::sync::Notify::new()),
        }
    }
}

impl Answers {
    /// True when answers come from the key watcher (else read stdin lines).
    pub(crate) fn watched(&self) -> bool {
        self.watching.load(Ordering::SeqCst)
    }

    /// Waits for the answer to the question just printed.
    pub(crate) async fn next(&self) -> Answer {
        let mut rx = self.rx.lock().await;
        while rx.try_recv().is_ok() {}
        self.asking.store(true, Ordering::SeqCst);
        let answer = rx.recv().await.unwrap_or(Answer::Cancelled);
        self.asking.store(false, Ordering::SeqCst);
        answer
    }
}

/// The keyboard watcher of one request; [`KeyWatch::stop`] restores the terminal.
pub(crate) struct KeyWatch {
    saved: libc::termios,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    typed: Arc<Mutex<Vec<u8>>>,
    answers: Arc<Answers>,
}

impl KeyWatch {
    /// Starts watching when stdin is a terminal; `None` otherwise.
    pub(crate) fn start(cancel: CancellationToken, answers: Arc<Answers>) -> Option<KeyWatch> {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: isatty/tcgetattr/tcsetattr only read and write the struct we own.
        let saved = unsafe {
            if libc::isatty(fd) != 1 {
                return None;
            }
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &raw mut t) != 0 {
                return None;
            }
            let mut raw = t;
            raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
            raw.c_cc[libc::VMIN] = 0;
            raw.c_cc[libc::VTIME] = 1;
            if libc::tcsetattr(fd, libc::TCSANOW, &raw const raw) != 0 {
                return None;
            }
            t
        };
        let stop = Arc::new(AtomicBool::new(false));
        let typed = Arc::new(Mutex::new(Vec::new()));
        answers.watching.store(true, Ordering::SeqCst);
        let thread = {
            let (stop, typed, answers) = (stop.clone(), typed.clone(), answers.clone());
            std::thread::spawn(move || watch(fd, &stop, &cancel, &answers, &typed))
        };
        Some(KeyWatch { saved, stop, thread: Some(thread), typed, answers })
    }

    /// Stops watching, restores the terminal, and returns what was typed
    /// meanwhile (for the next prompt).
    pub(crate) fn stop(mut self) -> String {
        self.release();
        let typed = std::mem::take(&mut *self.typed.lock().unwrap_or_else(PoisonError::into_inner));
        String::from_utf8_lossy(&typed).into_owned()
    }

    /// Ends the thread and gives the terminal its settings back (once).
    fn release(&mut self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.answers.watching.store(false, Ordering::SeqCst);
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: restores the settings read in `start`.
        unsafe {
            libc::tcsetattr(fd, libc::TCSANOW, &raw const self.saved);
        }
    }
}

/// A request that unwinds still leaves the terminal as it found it.
impl Drop for KeyWatch {
    fn drop(&mut self) {
        self.release();
    }
}

/// One byte from the terminal, or `None` after the read timeout (VTIME).
fn read_byte(fd: i32) -> Option<u8> {
    let mut b = 0u8;
    // SAFETY: reads at most one byte into `b`.
    let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
    (n == 1).then_some(b)
}

fn watch(
    fd: i32,
    stop: &AtomicBool,
    cancel: &CancellationToken,
    answers: &Answers,
    typed: &Mutex<Vec<u8>>,
) {
    let mut line: Vec<u8> = Vec::new();
    let mut held: Option<u8> = None;
    while !stop.load(Ordering::SeqCst) {
        let Some(b) = held.take().or_else(|| read_byte(fd)) else { continue };
        let asking = answers.asking.load(Ordering::SeqCst);
        match b {
            CTRL_C => interrupt(cancel, answers, asking),
            ESC => match read_byte(fd) {
                // A lone Esc: interrupt.
                None => interrupt(cancel, answers, asking),
                // An escape sequence (arrow keys, ...): skip it whole.
                Some(b'[' | b'O') => {
                    while let Some(c) = read_byte(fd) {
                        if (0x40..=0x7e).contains(&c) {
                            break;
                        }
                    }
                }
                // Esc and a key typed right after: the Esc interrupts, the
                // key is kept (never read as Alt+key, which ate a `/`).
                Some(next) => {
                    interrupt(cancel, answers, asking);
                    held = Some(next);
                }
            },
            b'\r' | b'\n' if asking => {
                eprintln!();
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                // Answered: what follows is type-ahead, even before the
                // approver has taken the answer.
                answers.asking.store(false, Ordering::SeqCst);
                let _ = answers.tx.send(Answer::Line(text));
            }
            BACKSPACE | CTRL_H if asking && line.pop().is_some() => eprint!("\x08 \x08"),
            BACKSPACE | CTRL_H if asking => {}
            BACKSPACE | CTRL_H => {
                typed.lock().unwrap_or_else(PoisonError::into_inner).pop();
            }
            b if asking && b >= 0x20 => {
                line.push(b);
                if let Ok(s) = std::str::from_utf8(&line)
                    && let Some(c) = s.chars().last()
                {
                    eprint!("{c}");
                }
            }
            // Enter ends a typed-ahead line: the REPL runs it next.
            b'\r' | b'\n' => typed.lock().unwrap_or_else(PoisonError::into_inner).push(b'\n'),
            b if b >= 0x20 || b == b'\t' => {
                typed.lock().unwrap_or_else(PoisonError::into_inner).push(b);
            }
            _ => {}
        }
    }
}

fn interrupt(cancel: &CancellationToken, answers: &Answers, asking: bool) {
    if !cancel.is_cancelled() {
        // A space: the cut answer may end mid-line.
        eprintln!(" \x1b[2m(interrupted)\x1b[0m");
    }
    cancel.cancel();
    if asking {
        // Answered (cancelled): keys typed from here on are for the next
        // prompt, not the question (they were lost in between).
        answers.asking.store(false, Ordering::SeqCst);
        let _ = answers.tx.send(Answer::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the watcher over `bytes` (then end of input) until `done` holds.
    fn feed(
        bytes: &[u8],
        asking: bool,
        done: impl Fn(&CancellationToken, &Answers, &[u8]) -> bool,
    ) -> (CancellationToken, Arc<Answers>, Vec<u8>) {
        let mut fds = [0i32; 2];
        // SAFETY: a fresh pipe; both ends are closed below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: writes the bytes we own into the pipe, then closes its write end.
        unsafe {
            libc::write(fds[1], bytes.as_ptr().cast(), bytes.len());
            libc::close(fds[1]);
        }
        let cancel = CancellationToken::new();
        let answers = Arc::new(Answers::default());
        answers.asking.store(asking, Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let typed = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, typed, answers, cancel) =
                (stop.clone(), typed.clone(), answers.clone(), cancel.clone());
            std::thread::spawn(move || watch(fds[0], &stop, &cancel, &answers, &typed))
        };
        // A hang guard, not a timing check: a watcher that never gets there
        // fails the assertions below instead of hanging the suite.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done(&cancel, &answers, &typed.lock().unwrap())
            && std::time::Instant::now() < deadline
        {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
        thread.join().unwrap();
        // SAFETY: closes the read end opened above.
        unsafe { libc::close(fds[0]) };
        let typed = typed.lock().unwrap().clone();
        (cancel, answers, typed)
    }

    #[test]
    fn a_lone_esc_interrupts_but_an_arrow_key_does_not() {
        let (cancel, _, typed) = feed(b"ab\x1b[Ac\x1b", false, |c, _, _| c.is_cancelled());
        assert!(cancel.is_cancelled());
        assert_eq!(typed, b"abc", "typing is kept for the next prompt, the arrow key is not");
        let (cancel, _, _) = feed(b"x\x1b[B/usage", false, |_, _, t| t.len() == 7);
        assert!(!cancel.is_cancelled());
    }

    #[test]
    fn esc_never_swallows_the_next_slash() {
        let (_, _, typed) = feed(b"\x1b[A/usage", false, |_, _, t| t.len() == 6);
        assert_eq!(typed, b"/usage");
        let (cancel, _, typed) = feed(b"\x1b/usage", false, |_, _, t| t.len() == 6);
        assert!(cancel.is_cancelled());
        assert_eq!(typed, b"/usage");
    }

    #[test]
    fn keys_typed_right_after_ctrl_c_at_a_question_go_to_the_next_prompt() {
        // The approver takes the cancellation later; the keys must not wait
        // in the question's line meanwhile (`/u` of `/usage` was lost).
        let (cancel, answers, typed) = feed(b"\x03/usage\r", true, |_, _, t| t.len() == 7);
        assert!(cancel.is_cancelled());
        assert!(!answers.asking.load(Ordering::SeqCst));
        assert_eq!(typed, b"/usage\n");
    }

    #[test]
    fn an_answer_is_a_line_and_ctrl_c_at_a_question_cancels() {
        let (cancel, answers, _) =
            feed(b"yx\x7f\r", true, |_, a, _| !a.rx.try_lock().unwrap().is_empty());
        assert!(!cancel.is_cancelled());
        assert_eq!(answers.rx.try_lock().unwrap().try_recv().unwrap(), Answer::Line("y".into()));
        let (cancel, answers, _) = feed(b"\x03", true, |c, _, _| c.is_cancelled());
        assert!(cancel.is_cancelled());
        assert_eq!(answers.rx.try_lock().unwrap().try_recv().unwrap(), Answer::Cancelled);
    }
}
