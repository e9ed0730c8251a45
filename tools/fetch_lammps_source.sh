#!/usr/bin/env bash
# Downloads the Debian source package of the installed LAMMPS (liblammps-dev's source version) into
# DIR through a private deb-src list built from the system's own apt sources; the system apt
# configuration is untouched. Prints the path of the upstream tarball (lammps_*.orig.tar.xz).
#   tools/fetch_lammps_source.sh DIR [VERSION]
set -euo pipefail
dir=$1
version=${2:-$(dpkg-query -W -f='${source:Version}' liblammps-dev)}
mkdir -p "$dir/lists/partial" "$dir/parts"
chmod 755 "$dir"  # apt drops to user _apt for downloads
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$dir/parts/src.sources"
else
  grep -h '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' > "$dir/parts/src.list"
fi
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$dir/parts" -o "Dir::State::Lists=$dir/lists")
apt-get "${apt_opts[@]}" update -qq
(cd "$dir" && apt-get "${apt_opts[@]}" source --download-only -qq "lammps=$version" 2>/dev/null)
ls "$dir"/lammps_*.orig.tar.* | head -n 1
