use std::io::Read as _;

use object::{Object as _, ReadRef as _};

use super::*;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tracer-files-{}-{name}", std::process::id()));
    drop(std::fs::remove_dir_all(&dir));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn refuses_what_is_not_a_regular_file_before_opening_it() {
    let dir = scratch("kinds");
    let fifo = dir.join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    // Opening a FIFO for reading would wait for a writer: the O_PATH handle never does.
    for (path, kind) in [(fifo.as_path(), "a FIFO"), (Path::new("/dev/zero"), "a character device")] {
        let e = CodeFile::user(path).unwrap_err();
        assert!(matches!(e.why, Why::NotRegular(k) if k == kind), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    assert!(matches!(CodeFile::user(&dir).unwrap_err().why, Why::NotRegular("a directory")));
    assert!(matches!(CodeFile::user(&dir.join("none")).unwrap_err().why, Why::Open(_)));
}

#[test]
fn reads_are_checked_against_the_file() {
    let dir = scratch("reads");
    let path = dir.join("f");
    std::fs::write(&path, b"0123456789").unwrap();
    let f = CodeFile::user(&path).unwrap();
    assert_eq!(f.len(), 10);
    let mut b = [0; 4];
    f.read_exact_at(6, &mut b).unwrap();
    assert_eq!(&b, b"6789");
    assert!(matches!(f.read_exact_at(7, &mut b).unwrap_err().why, Why::OutOfBounds { .. }));
    assert!(matches!(f.read_exact_at(u64::MAX - 1, &mut b).unwrap_err().why, Why::OutOfBounds { .. }));
    assert!(matches!(f.read_vec(0, 8, 4, "test").unwrap_err().why, Why::TooBig { .. }));
    assert_eq!(f.read_at_most(8, &mut b).unwrap(), 2);
    let mut s = String::new();
    f.stream(2, 3).unwrap().read_to_string(&mut s).unwrap();
    assert_eq!(s, "234");
    f.stream(8, 3).unwrap_err();
    // A file truncated after it was opened: reads fail, nothing dies.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(2).unwrap();
    f.read_exact_at(6, &mut b).unwrap_err();
}

#[test]
fn a_mapping_is_opened_as_the_file_mapped() {
    use crate::os::proc::Procs as _;
    let me = std::process::id();
    let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
    let maps = crate::os::proc::LIVE.maps(me).unwrap();
    let m = maps.iter().find(|m| Path::new(&m.path) == exe).unwrap();
    let f = CodeFile::mapped(me, m.start, m.end, m.dev, m.inode, &m.path).unwrap();
    assert_eq!(f.id(), (m.dev, m.inode));
    // Another inode than the maps line says: refused.
    let e = CodeFile::mapped(me, m.start, m.end, m.dev, m.inode + 1, &m.path).unwrap_err();
    assert!(matches!(e.why, Why::Changed), "{e}");
}

#[test]
fn a_root_keeps_absolute_links_inside_it() {
    let dir = scratch("root");
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    std::fs::write(dir.join("etc/hostname"), b"inside").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.join("link")).unwrap();
    let root = Root::open_dir(dir.to_str().unwrap(), "t".into()).unwrap();
    let f = root.open("/link").unwrap();
    let mut b = vec![0; f.len() as usize];
    f.read_exact_at(0, &mut b).unwrap();
    assert_eq!(b, b"inside");
    // `..` cannot climb out either.
    let f = root.open("/../../../../etc/hostname").unwrap();
    assert_eq!(f.len(), 6);
    // Beneath a directory, a link out of it is refused (a link within it is followed).
    std::fs::create_dir_all(dir.join("tree/sub")).unwrap();
    std::fs::write(dir.join("tree/sub/lib.so"), b"code").unwrap();
    std::os::unix::fs::symlink("sub/lib.so", dir.join("tree/inside")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.join("tree/absolute")).unwrap();
    std::os::unix::fs::symlink("../etc/hostname", dir.join("tree/up")).unwrap();
    let tree = root.beneath("/tree").unwrap();
    assert_eq!(tree.open("inside").unwrap().len(), 4);
    assert_eq!(tree.shown("inside"), "/tree/inside");
    for out in ["absolute", "up", "../etc/hostname"] {
        assert!(matches!(tree.open(out).unwrap_err().why, Why::Open(_)), "{out} left the tree");
    }
    let mut names = tree.list(".").unwrap();
    names.sort();
    assert_eq!(names, ["absolute", "inside", "sub", "up"]);
}

#[test]
fn object_parses_through_bounded_reads() {
    let exe = std::env::current_exe().unwrap();
    let f = CodeFile::user(&exe).unwrap();
    let view = f.elf();
    let elf = object::File::parse(&view).unwrap();
    assert!(elf.section_by_name(".text").is_some());
    use object::ObjectSymbol as _;
    assert!(elf.symbols().any(|s| s.name() == Ok("main")));
    // A tiny budget: the parse fails instead of reading.
    let small = Bounded::new(&f, 0, f.len(), 64);
    let parsed = object::File::parse(&small);
    assert!(parsed.is_err(), "a 64-byte budget parsed the whole file");
    // Ranges outside the window fail.
    let view = f.elf();
    (&view).read_bytes_at(f.len() - 1, 2).unwrap_err();
    (&view).read_bytes_at(u64::MAX, 2).unwrap_err();
}
