//! `ferroclaw pairing list|approve|revoke`: the owner's side of DM pairing.
//! The gateway reads the same files (or, several gateways, the same
//! database) on every message, so an approval takes effect at once, without
//! a restart.

use clap::Subcommand;
use ferroclaw_core::Config;
use ferroclaw_gateway::cron::rfc3339_ms;
use ferroclaw_gateway::pairing::PairingStore;

use crate::exit;
use crate::setup::SetupError;

#[derive(Debug, Subcommand)]
pub(crate) enum PairingAction {
    /// Pending codes and approved senders of every channel.
    List,
    /// Let in the sender who was given CODE on CHANNEL.
    Approve { channel: String, code: String },
    /// Stop letting a sender in.
    Revoke { channel: String, sender: String },
}

/// Runs `ferroclaw pairing ACTION`.
pub(crate) async fn run(action: &PairingAction) -> Result<i32, SetupError> {
    let home = Config::default_home();
    let mut store = PairingStore::new(&home);
    // Several gateways: pairing is in their database.
    if let Some(db) = crate::database::shared_store(&home).await? {
        store = PairingStore::database(db);
    }
    let fail = |e: ferroclaw_gateway::pairing::PairingError| SetupError::Other(e.to_string());
    match action {
        PairingAction::List => {
            let channels = store.channels().await.map_err(fail)?;
            if channels.is_empty() {
                println!("no pairing requests or approved senders yet");
            }
            let now = ferroclaw_gateway::files::now_ms();
            for channel in channels {
                let state = store.load(&channel).await.map_err(fail)?;
                for p in state.pending.iter().filter(|p| p.expires_at_ms > now) {
                    let name = p.name.as_deref().unwrap_or("");
                    println!(
                        "{channel}  pending   {}  sender {} {name}  expires {}",
                        p.code,
                        p.sender,
                        rfc3339_ms(p.expires_at_ms)
                    );
                }
                for a in &state.approved {
                    let name = a.name.as_deref().unwrap_or("");
                    println!(
                        "{channel}  approved  sender {} {name}  since {}",
                        a.sender,
                        rfc3339_ms(a.approved_at_ms)
                    );
                }
            }
        }
        PairingAction::Approve { channel, code } => {
            let approved = store.approve(channel, code).await.map_err(fail)?;
            println!("approved sender {} on {channel}", approved.sender);
        }
        PairingAction::Revoke { channel, sender } => {
            if store.revoke(channel, sender).await.map_err(fail)? {
                println!("revoked sender {sender} on {channel}");
            } else {
                return Err(SetupError::Other(format!(
                    "sender {sender} is not approved on {channel}"
                )));
            }
        }
    }
    Ok(exit::OK)
}
