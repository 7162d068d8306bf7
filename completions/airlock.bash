# bash completion for airlock(1). Installed as
# $datadir/bash-completion/completions/airlock.

_airlock_presets()
{
	local dir=${AIRLOCK_POLICY_DIR:-@POLICY_DIR@} f
	for f in "$dir"/*.yaml; do
		[ -e "$f" ] || continue
		f=${f##*/}
		printf '%s\n' "${f%.yaml}"
	done
}

_airlock()
{
	local cur prev cmd sub i opts
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	cmd=${COMP_WORDS[1]:-}
	sub=${COMP_WORDS[2]:-}

	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "run proxy policy log diff selftest --help --version" -- "$cur"))
		return
	fi
	# After -- the rest is CMD's: complete commands, then files.
	for ((i = 2; i < COMP_CWORD; i++)); do
		if [ "${COMP_WORDS[i]}" = "--" ]; then
			if [ "$i" -eq $((COMP_CWORD - 1)) ]; then
				COMPREPLY=($(compgen -c -- "$cur"))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi
			return
		fi
	done
	case $prev in
	-p | --policy)
		COMPREPLY=($(compgen -W "$(_airlock_presets)" -- "$cur") $(compgen -f -- "$cur"))
		return
		;;
	--log | --hosts-file)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--ids)
		COMPREPLY=($(compgen -W "one range" -- "$cur"))
		return
		;;
	--workdir | --rw | --ro | --tmpfs | --hide | --overlay-keep | --cache)
		COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -- "$cur"))
		return
		;;
	--color)
		COMPREPLY=($(compgen -W "auto always never" -- "$cur"))
		return
		;;
	--env)
		COMPREPLY=($(compgen -e -- "$cur"))
		return
		;;
	--log-budget | --dns-upstream | --timeout | --listen | -l | --max-conns | \
		--transparent | --dns | --check | \
		--host | --task | --since | --wildcard-min | --name | --policy-dir | \
		--task-id | --label | --older)
		return
		;;
	esac
	case $cmd in
	run)
		opts="--policy --log --log-budget --verbose --quiet --audit --dns-upstream --timeout
		      --workdir --rw --ro --tmpfs --hide --share-home --cache --cache-shared
		      --env --clearenv --root --ids --overlay --overlay-keep
		      --task-id --label --help"
		;;
	proxy)
		opts="--policy --listen --transparent --dns --check --log --log-budget --verbose --dns-upstream --hosts-file
		      --audit --max-conns --help"
		;;
	selftest)
		opts="--verbose --root --help"
		;;
	diff)
		opts="--help"
		if [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -d -- "$cur"))
			return
		fi
		;;
	policy)
		if [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "check test --help" -- "$cur"))
			return
		fi
		opts="--policy-dir --help"
		if [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -W "$(_airlock_presets)" -- "$cur") $(compgen -f -- "$cur"))
			return
		fi
		;;
	log)
		if [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "show summary suggest replay verify export prune --help" -- "$cur"))
			return
		fi
		case $sub in
		show) opts="--denied --host --task --since --json --color --last --follow --help" ;;
		summary) opts="--json --last --help" ;;
		suggest) opts="--wildcard-min --name --include-denied --last --help" ;;
		replay) opts="--policy --last --help" ;;
		verify) opts="--last --help" ;;
		export) opts="--format --unverified --last --help" ;;
		prune) opts="--older --dry-run --help" ;;
		*) opts="--help" ;;
		esac
		;;
	*)
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _airlock airlock
