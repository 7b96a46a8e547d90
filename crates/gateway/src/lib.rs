//! placeholder
pub mod channel;
pub mod bus;
pub mod config;
pub mod cron;
pub mod files;
pub mod pairing;
