//! The kernel-driver view: ioctls on the GPU drivers, by name, from real syscalls.

use std::process::Command;

use integration_tests::*;

fn ioctls(records: &[Line]) -> Vec<&trace::Ioctl> {
    records.iter().filter_map(|r| if let Line::Ioctl(i) = r { Some(i) } else { None }).collect()
}

#[test]
fn ioctl_numbers_are_decoded_across_the_table() {
    let out = scratch_trace("ioctl-table");
    let prog = fixture("ioctl_table");
    let records = record_ok(&out, &["--", prog.to_str().unwrap()]);
    let names: Vec<&str> = ioctls(&records).iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "AMDKFD_IOC_GET_VERSION",
            "AMDKFD_IOC_CREATE_QUEUE",
            "AMDKFD_IOC_CREATE_QUEUE",
            "AMDKFD_IOC_DESTROY_QUEUE",
            "AMDKFD_IOC_WAIT_EVENTS",
            "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU",
            "AMDKFD_IOC_FREE_MEMORY_OF_GPU",
            "AMDKFD_IOC_MAP_MEMORY_TO_GPU",
            "AMDKFD_IOC_ACQUIRE_VM",
            "AMDKFD_IOC_RUNTIME_ENABLE",
            "AMDKFD_IOC_IPC_IMPORT_HANDLE",
            "AMDKFD_IOC_0x5a",
            "DRM_IOCTL_AMDGPU_GEM_CREATE",
            "DRM_IOCTL_AMDGPU_INFO",
            "DRM_IOCTL_AMDGPU_GEM_VA",
            "DRM_IOCTL_AMDGPU_USERQ",
        ],
        "core DRM and non-GPU requests must not be recorded"
    );
    for i in ioctls(&records) {
        assert_eq!(i.ret, i64::from(-libc::ENOTTY), "{i:?}");
        assert!(i.dur > 0);
    }
    let q = ioctls(&records).into_iter().find(|i| i.cmd == 0xc0604b02).unwrap();
    assert_eq!(
        (q.fields["ring_base_address"], q.fields["ring_size"], q.fields["queue_type"]),
        (0x7f00_0000_1000, 1 << 20, 2)
    );
    let a = ioctls(&records).into_iter().find(|i| i.name == "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU").unwrap();
    assert_eq!((a.fields["size"], a.fields["flags"]), (64 << 20, 0x8000_0001));
    assert_eq!(footer(&records).counters["ioctl_unknown"], 1);
}

#[test]
fn rocminfo_as_a_real_kfd_client() {
    // rocminfo needs an amdgpu module (lsmod) and a /dev/kfd: in a private mount namespace, /dev/kfd is
    // /dev/null and a stand-in lsmod says amdgpu is loaded. rocminfo then asks KFD for its version.
    let dir = scratch("rocminfo");
    let out = dir.join("t.jsonl");
    let fakebin = dir.join("bin");
    std::fs::create_dir_all(&fakebin).unwrap();
    std::fs::write(fakebin.join("lsmod"), "#!/bin/sh\necho 'Module Size Used by'\necho 'amdgpu 1 0'\n").unwrap();
    Command::new("chmod").arg("+x").arg(fakebin.join("lsmod")).status().unwrap();
    let old = dir.join("olddev");
    std::fs::create_dir_all(&old).unwrap();
    let script = format!(
        "mount --bind /dev {old} && mount -t tmpfs tmpfs /dev && \
         for n in null zero random urandom full tty; do touch /dev/$n; mount --bind {old}/$n /dev/$n; done && \
         touch /dev/kfd && mount --bind {old}/null /dev/kfd && PATH={bin}:$PATH exec rocminfo",
        old = old.display(),
        bin = fakebin.display()
    );
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", "unshare", "-m", "/bin/sh", "-c", &script]);
    // tracer exits with the command's status: rocminfo's, through the shell that execs it.
    assert_eq!(o.status.code(), Some(8), "{}", String::from_utf8_lossy(&o.stderr));
    let records = read_trace(&out);
    // The command's own exit (the shell's helpers, mount and touch, are traced children too).
    let exit = records.iter().find_map(|r| if let Line::Exit(e) = r { e.code.map(|_| e) } else { None }).unwrap();
    assert_eq!(exit.code, Some(8), "rocminfo should fail with HSA_STATUS_ERROR_OUT_OF_RESOURCES");
    let v = ioctls(&records).into_iter().find(|i| i.name == "AMDKFD_IOC_GET_VERSION").expect("GET_VERSION recorded");
    assert_eq!((v.cmd, v.ret), (0x80084b01, i64::from(-libc::ENOTTY)));
    let procs: Vec<&trace::Process> =
        records.iter().filter_map(|r| if let Line::Process(p) = r { Some(p) } else { None }).collect();
    assert!(procs.iter().any(|p| p.pid == v.pid && p.comm == "rocminfo"), "{procs:?}");

    // The real libhsa-runtime64: its entry points are attached by name on the real file, and rocminfo's
    // hsa_init fires (and fails, HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008).
    let libs: Vec<&trace::Library> =
        records.iter().filter_map(|r| if let Line::Library(l) = r { Some(l) } else { None }).collect();
    let hsa = libs.iter().find(|l| l.path.contains("libhsa-runtime64.so")).expect("real libhsa-runtime64 probed");
    let probes: Vec<&trace::Probe> = records
        .iter()
        .filter_map(|r| if let Line::Probe(p) = r { (p.lib == hsa.id).then_some(p) } else { None })
        .collect();
    for api in [
        "hsa_init",
        "hsa_queue_create",
        "hsa_signal_store_screlease",
        "hsa_executable_get_symbol_by_name",
        "hsa_executable_symbol_get_info",
    ] {
        assert!(
            probes.iter().any(|p| p.api == api && p.error.is_none() && p.offset.is_some()),
            "{api} not attached: {probes:?}"
        );
    }
    let init =
        calls(&records).into_iter().find(|c| c.api.name() == "hsa_init" && c.pid == v.pid).expect("hsa_init recorded");
    assert_eq!((init.lib, init.ret), (hsa.id, 0x1008));
}
