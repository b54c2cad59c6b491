//! Whom a directory is listed for: root lists only what the process it lists for could list itself.

/// Whom a directory is listed for: a process's effective user and its groups, so that root lists only what
/// that process could list itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reader {
    pub(crate) uid: u32,
    /// Its effective group and its supplementary groups.
    pub(crate) gids: Vec<u32>,
}

impl Reader {
    /// Anyone: a directory every user may list (for a process whose credentials are gone).
    pub(crate) const fn anyone() -> Self {
        Self { uid: u32::MAX, gids: Vec::new() }
    }

    /// Whether it may list a directory of this owner, group and mode (read and search), as the kernel's
    /// check without ACLs decides; root may.
    pub(crate) fn may_list(&self, uid: u32, gid: u32, mode: u32) -> bool {
        let bits = if self.uid == 0 {
            return true;
        } else if uid == self.uid {
            mode >> 6
        } else if self.gids.contains(&gid) {
            mode >> 3
        } else {
            mode
        };
        bits & 0o5 == 0o5
    }
}

#[cfg(test)]
mod tests {
    use super::Reader;

    #[test]
    fn a_reader_lists_what_its_user_group_or_anyone_may_read_and_search() {
        let user = Reader { uid: 1000, gids: vec![100, 27] };
        // Root-only 0700 directory: its owner (root) may, the user may not.
        assert!(!user.may_list(0, 0, 0o40700));
        assert!(Reader { uid: 0, gids: vec![] }.may_list(1000, 1000, 0o40000));
        assert!(user.may_list(1000, 1000, 0o40500));
        assert!(!user.may_list(1000, 1000, 0o40300));
        assert!(user.may_list(0, 27, 0o40750));
        assert!(!user.may_list(0, 28, 0o40750));
        assert!(user.may_list(0, 0, 0o40755));
        // Search without read is not a listing.
        assert!(!user.may_list(0, 0, 0o40711));
        assert!(!Reader::anyone().may_list(0, 0, 0o40750));
        assert!(Reader::anyone().may_list(0, 0, 0o40755));
    }
}
