//! `ferroclaw tasks`: prints the project's task board (`.agent/tasks/`);
//! `ferroclaw team`: its agent team (`.agent/team/`).

use ferroclaw_team::{TaskBoard, Team, render_board, render_team};

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// Prints the board of the workspace; a board that cannot be read is an
/// error, single unreadable task files are listed with the rest.
pub(crate) fn run(cli: &Cli) -> Result<i32, SetupError> {
    let board = TaskBoard::open(setup::workspace(cli)?);
    match board.list() {
        Ok(listing) => {
            println!("{}", render_board(&listing));
            Ok(exit::OK)
        }
        Err(e) => {
            eprintln!("ferroclaw: task board {}: {e}", board.dir().display());
            Ok(exit::FAILED)
        }
    }
}

/// Prints the team of the workspace.
pub(crate) fn team(cli: &Cli) -> Result<i32, SetupError> {
    let team = Team::open(setup::workspace(cli)?);
    match render_team(
        &team,
        &ferroclaw_core::Config::user_config_shown(&ferroclaw_core::Config::default_home()),
    ) {
        Ok(text) => {
            println!("{text}");
            Ok(exit::OK)
        }
        Err(e) => {
            eprintln!("ferroclaw: team {}: {e}", team.dir().display());
            Ok(exit::FAILED)
        }
    }
}
