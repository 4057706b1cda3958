# Sourced by the image scripts: bare_rootfs ROOT PREFIX [DIR...] lays out a merged-/usr rootfs
# (lib -> usr/lib, lib64 -> usr/lib64, bin -> usr/bin) that runs this machine's /usr and the
# Python installation at PREFIX through read-only mounts, plus the extra DIRs (relative).
# /sbin stays a real folder: docker's init is mounted at /sbin/docker-init, which must not
# resolve into the read-only /usr mount.
bare_rootfs() {
    local root=$1 prefix=$2
    shift 2
    mkdir -p "$root"/{usr,etc,tmp,root,proc,sys,dev,run,sbin,var/tmp} "$root$prefix"
    local dir
    for dir in "$@"; do mkdir -p "$root/$dir"; done
    ln -s usr/lib "$root/lib"
    ln -s usr/lib64 "$root/lib64"
    ln -s usr/bin "$root/bin"
    chmod 1777 "$root/tmp" "$root/var/tmp"
    echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
    echo "root:x:0:" > "$root/etc/group"
    printf '127.0.0.1 localhost\n' > "$root/etc/hosts"
}
