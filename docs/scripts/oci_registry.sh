# Sourced by docs/scripts/oci_bench.sh and schemes_bench.sh: a loopback
# Debian `docker-registry serve` (distribution 2.8, filesystem store)
# holding one checkpoint as a ModelPack artifact. Needs curl, python3,
# sha256sum, docker-registry.
#
#   freeport                    prints a free TCP port on 127.0.0.1
#   registry_start DIR [LOG]    starts the registry, its store and config in
#                               DIR, its output in DIR/registry.log; LOG=1
#                               turns its access log on (one line a request,
#                               what gets counts); sets rpid, rport, reg
#   registry_push FILE          pushes FILE as a blob of the repository
#                               bench (monolithic POST and PUT); prints its
#                               digest
#   registry_model FILE DIR     pushes FILE as the raw weight layer
#                               model.safetensors of bench:v1 with an empty
#                               config (files written in DIR); sets wd (the
#                               layer's digest), size, src (its oci:// name)
#                               and blob (the layer's URL)
#   registry_gets               the GETs of the layer the registry answered
#                               so far (with LOG=1)

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

registry_start() { # DIR [LOG]
	local dir=$1 log=${2:-}
	rport=$(freeport)
	{
		echo "version: 0.1"
		echo "log:"
		echo "  level: error"
		if [ -n "$log" ]; then
			echo "  accesslog:"
			echo "    disabled: false"
		fi
		echo "storage:"
		echo "  filesystem:"
		echo "    rootdirectory: $dir/store"
		echo "http:"
		echo "  addr: 127.0.0.1:$rport"
	} >"$dir/config.yml"
	docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
	rpid=$!
	reg=http://127.0.0.1:$rport
	until curl -s -o /dev/null "$reg/v2/"; do sleep 0.1; done
	registry_dir=$dir
}

registry_push() { # FILE
	local d loc
	d=sha256:$(sha256sum "$1" | cut -d' ' -f1)
	loc=$(curl -sS -X POST -D - -o /dev/null "$reg/v2/bench/blobs/uploads/" | tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
	case $loc in http*) ;; *) loc=$reg$loc ;; esac
	case $loc in *\?*) loc="$loc&digest=$d" ;; *) loc="$loc?digest=$d" ;; esac
	curl -sS --fail -X PUT -H 'Content-Type: application/octet-stream' -T "$1" "$loc" >/dev/null || return 1
	echo "$d"
}

registry_model() { # FILE DIR
	local cd_
	size=$(stat -c %s "$1")
	printf '{}' >"$2/config.json"
	wd=$(registry_push "$1") || return 1
	cd_=$(registry_push "$2/config.json") || return 1
	cat >"$2/manifest.json" <<MAN
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cncf.model.manifest.v1+json",
"config":{"mediaType":"application/vnd.cncf.model.config.v1+json","digest":"$cd_","size":2},
"layers":[{"mediaType":"application/vnd.cncf.model.weight.v1.raw","digest":"$wd","size":$size,"annotations":{"org.cncf.model.filepath":"model.safetensors"}}]}
MAN
	curl -sS --fail -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' -T "$2/manifest.json" "$reg/v2/bench/manifests/v1" >/dev/null || return 1
	src=oci://127.0.0.1:$rport/bench:v1
	blob=$reg/v2/bench/blobs/$wd
}

registry_gets() { grep -c "\"GET /v2/bench/blobs/$wd" "$registry_dir/registry.log"; }
