#!/bin/sh
# Installs the Debian/Ubuntu packages tfc builds and tests with (and, with --data, the data
# sets its configs train on). Uses sudo when not root. Safe to run again.
set -e
pkgs="build-essential libyaml-dev libopenblas-openmp-dev libpng-dev libjpeg-dev zlib1g-dev
      libjansson-dev libcunit1-dev nettle-dev openmpi-bin libopenmpi-dev libdnnl-dev
      pkgconf"
[ "$1" = "--data" ] && pkgs="$pkgs dataset-fashion-mnist fortunes"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
