//! Pairing of one home: `$FERROCLAW_HOME/pairing/CHANNEL.json`, small files
//! written atomically (temp file + rename) and read on every check, so the
//! CLI and a running gateway share them without signalling each other.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{
    ApprovedSender, CODE_TTL_MS, MAX_PENDING, PairingError, PairingRecords, PairingState,
    PendingPairing, new_code,
};
use crate::files::{now_ms, read_json, write_json_atomically};

/// The pairing files.
#[derive(Debug)]
pub(super) struct PairingFiles {
    dir: PathBuf,
}

impl PairingFiles {
    /// The files in `home/pairing`.
    pub(super) fn new(home: &Path) -> Self {
        PairingFiles { dir: home.join("pairing") }
    }

    fn path(&self, channel: &str) -> PathBuf {
        self.dir.join(format!("{channel}.json"))
    }

    fn read(&self, channel: &str) -> Result<PairingState, PairingError> {
        let path = self.path(channel);
        read_json(&path).map_err(|message| PairingError::File { path, message })
    }

    fn write(&self, channel: &str, state: &PairingState) -> Result<(), PairingError> {
        let path = self.path(channel);
        write_json_atomically(&path, state).map_err(|message| PairingError::File { path, message })
    }

    fn approved(&self, channel: &str, sender: &str) -> Result<bool, PairingError> {
        Ok(self.read(channel)?.approved.iter().any(|a| a.sender == sender))
    }

    fn new_request(
        &self,
        channel: &str,
        sender: &str,
        chat_id: &str,
        name: Option<String>,
    ) -> Result<PendingPairing, PairingError> {
        let now = now_ms();
        let mut state = self.read(channel)?;
        state.pending.retain(|p| p.expires_at_ms > now);
        if let Some(p) = state.pending.iter().find(|p| p.sender == sender) {
            return Ok(p.clone());
        }
        if state.pending.len() >= MAX_PENDING {
            state.pending.sort_by_key(|p| p.created_at_ms);
            state.pending.drain(..=state.pending.len() - MAX_PENDING);
        }
        let pending = PendingPairing {
            code: new_code().map_err(|e| PairingError::File {
                path: self.dir.clone(),
                message: format!("no random source for a code: {e}"),
            })?,
            sender: sender.to_string(),
            chat_id: chat_id.to_string(),
            name,
            created_at_ms: now,
            expires_at_ms: now + CODE_TTL_MS,
        };
        state.pending.push(pending.clone());
        self.write(channel, &state)?;
        Ok(pending)
    }
}

#[async_trait]
impl PairingRecords for PairingFiles {
    async fn load(&self, channel: &str) -> Result<PairingState, PairingError> {
        let mut state = self.read(channel)?;
        let now = now_ms();
        state.pending.retain(|p| p.expires_at_ms > now);
        Ok(state)
    }

    async fn is_approved(&self, channel: &str, sender: &str) -> Result<bool, PairingError> {
        self.approved(channel, sender)
    }

    async fn request(
        &self,
        channel: &str,
        sender: &str,
        chat_id: &str,
        name: Option<String>,
    ) -> Result<PendingPairing, PairingError> {
        self.new_request(channel, sender, chat_id, name)
    }

    async fn approve(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<ApprovedSender>, PairingError> {
        let now = now_ms();
        let mut state = self.read(channel)?;
        state.pending.retain(|p| p.expires_at_ms > now);
        let Some(i) = state.pending.iter().position(|p| p.code == code) else {
            return Ok(None);
        };
        let p = state.pending.remove(i);
        let approved = ApprovedSender { sender: p.sender, name: p.name, approved_at_ms: now };
        state.approved.retain(|a| a.sender != approved.sender);
        state.approved.push(approved.clone());
        self.write(channel, &state)?;
        Ok(Some(approved))
    }

    async fn deny(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<PendingPairing>, PairingError> {
        let mut state = self.read(channel)?;
        let Some(i) = state.pending.iter().position(|p| p.code == code) else {
            return Ok(None);
        };
        let denied = state.pending.remove(i);
        self.write(channel, &state)?;
        Ok(Some(denied))
    }

    async fn revoke(&self, channel: &str, sender: &str) -> Result<bool, PairingError> {
        let mut state = self.read(channel)?;
        let before = state.approved.len();
        state.approved.retain(|a| a.sender != sender);
        let removed = state.approved.len() != before;
        if removed {
            self.write(channel, &state)?;
        }
        Ok(removed)
    }

    async fn channels(&self) -> Result<Vec<String>, PairingError> {
        let mut out: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_string))
            .collect();
        out.sort();
        Ok(out)
    }

    fn is_approved_now(&self, channel: &str, sender: &str) -> Option<bool> {
        Some(self.approved(channel, sender).unwrap_or(false))
    }

    fn request_now(
        &self,
        channel: &str,
        sender: &str,
        chat_id: &str,
        name: Option<String>,
    ) -> Option<Result<PendingPairing, PairingError>> {
        Some(self.new_request(channel, sender, chat_id, name))
    }
}
