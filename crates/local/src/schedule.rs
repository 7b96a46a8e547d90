//! The model thread's decisions, apart from llama.cpp so they can be tested
//! alone: which sequence a new chat takes, where it can copy its prompt's
//! start from, and how one step's batch is shared among the chats.

/// How many leading items two slices share.
pub(crate) fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A free sequence as the scheduler sees it.
pub(crate) struct FreeSlot<'a, T> {
    pub index: usize,
    /// What its KV cells hold (left by the chat it served last).
    pub cached: &'a [T],
    /// When it was last used (a step counter): older is the better victim.
    pub last_used: u64,
}

/// The free slot for a new prompt: the one whose cache shares the longest
/// start with it (the previous turn of the same conversation), else the one
/// unused longest. `None` when no slot is free.
pub(crate) fn pick_slot<T: PartialEq>(free: &[FreeSlot<'_, T>], prompt: &[T]) -> Option<usize> {
    free.iter()
        .max_by_key(|s| (common_prefix(s.cached, prompt), std::cmp::Reverse(s.last_used)))
        .map(|s| s.index)
}

/// What one chat wants from the next decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Nothing this step (waiting to copy another chat's prompt start).
    Nothing,
    /// One token: the one it sampled last.
    Generate,
    /// Prompt tokens: `left` still to read, at most `until_pause` of them
    /// before it must stop (to save its prefix state).
    Read { left: usize, until_pause: usize },
}

/// Tokens each chat puts into one batch of at most `room` tokens, in the
/// order given. Generating chats go first, one token each, so a long
/// prompt being read never stalls the answers already streaming; prompts
/// share what is left, first come first served.
pub(crate) fn plan_batch(wants: &[Want], room: usize) -> Vec<usize> {
    let mut plan = vec![0; wants.len()];
    let mut left = room;
    for (i, w) in wants.iter().enumerate() {
        if *w == Want::Generate && left > 0 {
            plan[i] = 1;
            left -= 1;
        }
    }
    for (i, w) in wants.iter().enumerate() {
        if let Want::Read { left: need, until_pause } = *w {
            let n = need.min(until_pause).min(left);
            plan[i] = n;
            left -= n;
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_prompt_takes_the_free_slot_holding_its_conversation() {
        let a = [1, 2, 3, 4];
        let b = [1, 2, 9];
        let empty: [i32; 0] = [];
        let free = [
            FreeSlot { index: 0, cached: &empty[..], last_used: 0 },
            FreeSlot { index: 1, cached: &a[..], last_used: 5 },
            FreeSlot { index: 2, cached: &b[..], last_used: 1 },
        ];
        assert_eq!(pick_slot(&free, &[1, 2, 3, 4, 5]), Some(1));
        // Nothing shared: the slot unused longest.
        assert_eq!(pick_slot(&free, &[7, 7]), Some(0));
        assert_eq!(pick_slot::<i32>(&[], &[1]), None);
    }

    #[test]
    fn answers_in_progress_get_their_token_before_prompts_share_the_rest() {
        let wants = [
            Want::Read { left: 900, until_pause: 900 },
            Want::Generate,
            Want::Nothing,
            Want::Generate,
            Want::Read { left: 50, until_pause: 50 },
        ];
        assert_eq!(plan_batch(&wants, 512), vec![510, 1, 0, 1, 0]);
        assert_eq!(plan_batch(&wants, 2), vec![0, 1, 0, 1, 0]);
    }

    #[test]
    fn a_prompt_pauses_where_its_prefix_state_is_to_be_saved() {
        let wants =
            [Want::Read { left: 800, until_pause: 300 }, Want::Read { left: 20, until_pause: 20 }];
        assert_eq!(plan_batch(&wants, 512), vec![300, 20]);
    }
}
