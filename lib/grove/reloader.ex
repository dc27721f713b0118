defmodule Grove.Reloader do
  @moduledoc """
  Live reload, for development: saving a changed source file recompiles it
  and loads it into the running world within a second or two, with every
  connection, entity and zone kept (the first save of a file untouched for
  ten minutes or more within `:sweep` looks: see the option). `make run`
  starts one (`reload: true` in `config/dev.exs`); a release never does.

  BEAM code loading does the work: zones call the game's module, and herds
  their kinds', by name, so the next action or step after the load runs
  the new code, on the state as it was. What the world caches of a module
  is made again: a game's spec (its actions, hooks, version) is given to
  every zone (`Grove.World.Game.renew/3`), a kind's description (senses,
  name, emoji) to its herds. The zones of this node and the herds are
  held (`:sys.suspend/1`, as OTP's release handling does) from before the
  compile to after their states are upgraded, so no action, hook, tick or
  step of the new code sees a state of the old shape: an action is
  answered by the old code on the old state or by the new code on the
  upgraded state. The world stands still for as long as the compile
  takes; what arrives meanwhile waits, and is handled in order after.
  A zone that does not answer within `:hold_timeout` is not waited for:
  the reload is put off (`{:error, why}`, logged and counted), and the
  change is tried again at the next look.

  A change of the *shape* of state is handled by the module itself: a game
  whose `version/0` changed has every cell value and attribute passed
  through its `upgrade/3` (`Grove.Game`), in every zone or in none: one
  zone's upgrade that raises and they all keep their old state; an actor
  kind whose `version/0` changed has every actor's state passed through
  its `upgrade/2` (`upgrade(state, old_version)`). A version that changed
  without its upgrade, an upgrade that raises, a module that is no longer
  a valid game or kind, or a file that does not compile, is refused: the
  log says why, `grove_reloads_total{result="refused"}` counts it, and
  the running world keeps the code and state it had (the new code is
  loaded only at the next start, or when the file is saved again).

  ## Options

    * `:instance` - the Grove instance whose world and actors it reloads
      (required)
    * `:paths` - the directories whose `.ex` files it watches (default the
      Mix project's `elixirc_paths`, when Mix is running)
    * `:compile` - `:mix` to recompile through the project's Mix compiler
      (what `make run` does: the build stays in step with the sources), or
      `:files` to compile the changed files alone (default `:mix` when Mix
      runs, else `:files`)
    * `:interval` - milliseconds between two looks at the files (default
      `1000`); `check/1` looks at once, at every file
    * `:sweep` - a look reads the times of the directories, of the files
      saved in the last ten minutes and of one in `sweep` of the others,
      in turn: a file untouched for longer is read every `sweep` looks
      (default `5`). A look each second read every file's time, each a
      call on a dirty scheduler, where the files worked on are a few
      (docs/benchmarks.md, "The world alone": 5.6 % of the samples of
      `make run`'s walkers alone); `1` reads every file at every look
    * `:hold_timeout` - milliseconds a zone may take to be held, and to
      upgrade its state, before the reload is put off or refused (default
      `5000`)
  """

  use GenServer

  alias Grove.World.Game.Spec
  alias Grove.World

  require Logger

  # Seconds since its last save within which a file is read at every look.
  @recent 600

  defstruct [
    :instance,
    :paths,
    :compile,
    :interval,
    :hold_timeout,
    :sweep,
    looks: 0,
    files: %{},
    loaded: %{},
    dirs: %{}
  ]

  @doc "Starts a reloader; see the module doc for options."
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts, name: opts[:name])

  @doc """
  Looks at the files now and reloads what changed; returns the modules it
  loaded (`[]` when nothing changed) or `{:error, why}` when a change was
  refused or did not compile.
  """
  @spec check(GenServer.server()) :: {:ok, [module()]} | {:error, String.t()}
  def check(reloader), do: GenServer.call(reloader, :check, :infinity)

  @impl true
  def init(opts) do
    opts =
      Keyword.validate!(opts, [
        :instance,
        :name,
        paths: nil,
        compile: nil,
        interval: 1000,
        hold_timeout: 5000,
        sweep: 5
      ])

    mix? = Code.ensure_loaded?(Mix.Project) and Mix.Project.get() != nil

    paths =
      opts[:paths] ||
        if(mix?, do: Enum.map(Mix.Project.config()[:elixirc_paths], &Path.expand/1), else: [])

    state = %__MODULE__{
      instance: Keyword.fetch!(opts, :instance),
      paths: paths,
      compile: opts[:compile] || if(mix?, do: :mix, else: :files),
      interval: opts[:interval],
      hold_timeout: opts[:hold_timeout],
      sweep: opts[:sweep]
    }

    Logger.info("reload: watching #{Enum.join(paths, ", ")} for changes")
    Process.send_after(self(), :check, state.interval)
    {files, dirs} = scan(paths, %{}, %{}, :all)
    {:ok, %{state | files: files, loaded: sources(files), dirs: dirs}}
  end

  @impl true
  def handle_call(:check, _from, state) do
    {result, state} = check_files(state, :all)
    {:reply, result, state}
  end

  @impl true
  def handle_info(:check, state) do
    {_result, state} = check_files(state, {state.looks, state.sweep})
    Process.send_after(self(), :check, state.interval)
    {:noreply, %{state | looks: state.looks + 1}}
  end

  ## Files

  # Each file's modification time, size, digest and source, read again
  # only when the time or size moved, or the time is too recent to tell
  # two saves apart. (The source is what a refused change goes back to.)
  # The directories are walked again, for files added or removed, only
  # when a directory's time moved (adding, removing or renaming a file
  # in it moves it) or is too recent to tell; otherwise a look reads the
  # times of the files it knows and of their directories, nothing else.
  # Every time is read `raw`, not through the file server. This runs every
  # second in `make run`, whose world alone is measured (docs/benchmarks.md,
  # "The world alone"): walking the tree through the file server at every
  # look was 4 % of the resting walkers' reductions. A periodic look reads
  # the times of the files it knows only where `due?/4` says (`which`, the
  # look's number and the sweep); `check/1` and the first look read all.
  defp scan(paths, known, dirs, which) do
    now = System.os_time(:second)

    {listed, dirs} =
      if dirs == %{} or Enum.any?(dirs, fn {dir, mtime} -> stale?(dir, mtime, now) end),
        do: Enum.reduce(paths, {[], %{}}, &walk/2),
        else: {Map.keys(known), dirs}

    files =
      for file <- listed,
          entry = look(file, Map.get(known, file), now, which),
          entry != nil,
          into: %{},
          do: {file, entry}

    {files, dirs}
  end

  # A known file not due at this look is taken as it was; one whose time
  # and size did not move (and not too recently to tell two saves apart)
  # is not read again; one gone is nil.
  defp look(file, {mtime, _, _, _} = known, now, which) when which != :all do
    if due?(file, mtime, now, which), do: look(file, known, now, :all), else: known
  end

  defp look(file, known, now, _all) do
    case {stat(file), known} do
      {{:ok, %File.Stat{mtime: mtime, size: size}}, {mtime, size, _digest, _source}}
      when now - mtime > 2 ->
        known

      {{:ok, %File.Stat{mtime: mtime, size: size}}, _} ->
        read(file, mtime, size)

      {_gone, _} ->
        nil
    end
  end

  @doc false
  # Whether the periodic look number `look` of a sweep of `sweep` reads
  # the time of `file`, last seen modified at `mtime` (POSIX seconds,
  # `now` too): at every look when it was saved in the last
  # `@recent` seconds, else at one look in `sweep`, the same for a file
  # from look to look (by a hash of its path), so each is read within
  # `sweep` looks.
  @spec due?(Path.t(), integer(), integer(), {non_neg_integer(), pos_integer()}) :: boolean()
  def due?(_file, mtime, now, {_look, _sweep}) when now - mtime < @recent, do: true
  def due?(file, _mtime, _now, {look, sweep}), do: :erlang.phash2(file, sweep) == rem(look, sweep)

  defp stale?(dir, mtime, now) do
    case stat(dir) do
      {:ok, %File.Stat{mtime: ^mtime}} -> now - mtime <= 2
      _moved_or_gone -> true
    end
  end

  # The `.ex` files under a directory, as `Path.wildcard(dir <> "/**/*.ex")`
  # finds them (names that start with a dot left out), and the times of
  # the directories walked, each read before it is listed.
  defp walk(dir, {files, dirs}) do
    with {:ok, %File.Stat{type: :directory, mtime: mtime}} <- stat(dir),
         {:ok, names} <- File.ls(dir) do
      names
      |> Enum.reject(&String.starts_with?(&1, "."))
      |> Enum.map(&Path.join(dir, &1))
      |> Enum.reduce({files, Map.put(dirs, dir, mtime)}, fn path, {files, dirs} = acc ->
        cond do
          String.ends_with?(path, ".ex") and File.regular?(path, raw: true) ->
            {[path | files], dirs}

          File.dir?(path, raw: true) ->
            walk(path, acc)

          true ->
            acc
        end
      end)
    else
      _not_a_directory -> {files, dirs}
    end
  end

  defp stat(path) do
    case :file.read_file_info(path, [:raw, {:time, :posix}]) do
      {:ok, info} -> {:ok, File.Stat.from_record(info)}
      {:error, _} = error -> error
    end
  end

  # What each file said when its code was last loaded: a refused change
  # goes back to it.
  defp sources(files), do: for({file, {_, _, _, source}} <- files, into: %{}, do: {file, source})

  defp read(file, mtime, size) do
    case File.read(file) do
      {:ok, source} -> {mtime, size, :erlang.md5(source), source}
      {:error, _} -> {mtime, size, nil, nil}
    end
  end

  defp check_files(state, which) do
    {files, dirs} = scan(state.paths, state.files, state.dirs, which)

    changed =
      for {file, {_, _, digest, _}} <- files,
          match?(
            {_, _, old, _} when old != digest,
            Map.get(state.files, file, {nil, nil, nil, nil})
          ),
          do: file

    case changed do
      [] ->
        {{:ok, []}, %{state | files: files, dirs: dirs}}

      changed ->
        result =
          try do
            reload(state, changed)
          rescue
            error ->
              why = Exception.message(error)
              Logger.error("reload: #{why}")
              {:error, why}
          end

        case result do
          {:ok, _modules} ->
            count(state, :reloads)
            {result, %{state | files: files, dirs: dirs, loaded: sources(files)}}

          {:error, _why} ->
            count(state, :reloads_refused)
            {result, %{state | files: files, dirs: dirs}}

          # The files as they were: the change is seen again at the next look.
          {:retry, why} ->
            count(state, :reloads_put_off)
            {{:error, why}, state}
        end
    end
  end

  # Reloads by outcome, in the world's counters (`grove_reloads_total`).
  defp count(state, key) do
    World.Stats.incr(World.fetch!(Grove.world(state.instance)).stats, key)
  rescue
    ArgumentError -> :ok
  end

  ## Reloading

  defp reload(state, changed) do
    world = World.fetch!(Grove.world(state.instance))
    actors = Grove.actors(state.instance)
    kinds = actor_kinds(actors)
    watched = if(world.game, do: [world.game.module], else: []) ++ Map.keys(kinds)

    before =
      for module <- watched, into: %{}, do: {module, {md5(module), :code.get_object_code(module)}}

    # Loading new code and bringing the state along are two steps: the
    # herds and the game's zones are held from before the first to after
    # the second, so that no step, action, hook or tick of the new code
    # runs on a state of the old shape.
    herds = if kinds == %{}, do: [], else: Grove.Actors.hold(actors)

    try do
      case hold_zones(world, state.hold_timeout) do
        {:ok, zones} ->
          try do
            reload(state, changed, world, {actors, kinds, herds, zones}, before)
          after
            if zones, do: World.Game.release(zones)
          end

        {:error, late} ->
          why =
            "#{describe_late(late)} did not answer within #{state.hold_timeout} ms, so the " <>
              "game's code could not be loaded safely; it will be tried again"

          Logger.warning("reload put off: #{why}")
          {:retry, why}
      end
    after
      Grove.Actors.release(herds)
    end
  end

  defp describe_late([:starter]), do: "the supervisor that starts zones"

  defp describe_late(late) do
    zones = Enum.map_join(Enum.take(late, 10), ", ", &Integer.to_string/1)
    "zone #{zones}#{if length(late) > 10, do: " (#{length(late)} zones)", else: ""}"
  end

  defp hold_zones(%World{game: nil}, _timeout), do: {:ok, nil}
  defp hold_zones(world, timeout), do: World.Game.hold(world, timeout)

  defp reload(state, changed, world, held, before) do
    case compile(state, changed) do
      {:ok, _modules} ->
        reloaded = for {module, {md5, _}} <- before, md5(module) != md5, do: module

        case renew(world, held, reloaded, state.hold_timeout) do
          :ok ->
            if reloaded != [],
              do:
                Logger.info(
                  "reload: #{Enum.map_join(reloaded, ", ", &inspect/1)} reloaded, state kept"
                )

            {:ok, reloaded}

          {:error, why} ->
            restore(state, changed, reloaded, before)

            Logger.error(
              "reload refused: #{why}; the running world keeps its code (restart to load the new)"
            )

            {:error, why}
        end

      {:error, why} ->
        Logger.error("reload: #{why}")
        {:error, why}
    end
  end

  # The world keeps the code it had: the modules' binaries as they were
  # (from their beam files, for a Mix build), else the files' sources as
  # they were (files compiled in memory alone).
  defp restore(state, changed, reloaded, before) do
    for module <- reloaded do
      case before[module] do
        {_md5, {^module, binary, file}} ->
          :code.purge(module)
          {:module, ^module} = :code.load_binary(module, file, binary)

        _no_beam ->
          for file <- changed, source = Map.get(state.loaded, file), source != nil do
            quietly(fn -> Code.compile_string(source, file) end)
          end
      end
    end

    :ok
  end

  defp compile(%__MODULE__{compile: :mix}, _changed) do
    Mix.Task.reenable("compile.elixir")

    case Mix.Task.run("compile.elixir", ["--return-errors"]) do
      {:error, diagnostics} -> {:error, "did not compile: " <> describe(diagnostics)}
      _ok_or_noop -> {:ok, []}
    end
  end

  defp compile(%__MODULE__{compile: :files}, changed) do
    case quietly(fn -> Kernel.ParallelCompiler.compile(changed, return_diagnostics: true) end) do
      {:ok, modules, _warnings} -> {:ok, modules}
      {:error, errors, _warnings} -> {:error, "did not compile: " <> describe(errors)}
    end
  end

  defp describe(diagnostics) when is_list(diagnostics) do
    Enum.map_join(diagnostics, "; ", fn
      %{file: file, position: position, message: message} -> where(file, position) <> message
      {file, position, message} -> where(file, position) <> to_string(message)
      other -> inspect(other)
    end)
  end

  defp describe(other), do: inspect(other)

  # Compiling a module again is what reloading is: no warning for it.
  defp quietly(compile) do
    previous = Code.get_compiler_option(:ignore_module_conflict)
    Code.put_compiler_option(:ignore_module_conflict, true)

    try do
      compile.()
    after
      Code.put_compiler_option(:ignore_module_conflict, previous)
    end
  end

  defp where(file, {line, column}),
    do: "#{Path.relative_to_cwd(to_string(file))}:#{line}:#{column}: "

  defp where(file, line), do: "#{Path.relative_to_cwd(to_string(file))}:#{line}: "

  defp md5(module) do
    if Code.ensure_loaded?(module), do: module.module_info(:md5), else: nil
  end

  # The world's game and the actors' kinds take the new code: checked
  # first, all of them, then given to the zones (which may still refuse
  # it: an upgrade that fails) and the herds.
  defp renew(world, {actors, kinds, herds, zones}, reloaded, timeout) do
    game = world.game && world.game.module

    with :ok <- check_game(world.game, game in reloaded),
         :ok <- check_kinds(kinds, reloaded),
         :ok <- renew_game(world, zones, game in reloaded, timeout) do
      for module <- reloaded,
          Map.has_key?(kinds, module),
          do: Grove.Actors.renew(actors, module, herds)

      :ok
    end
  end

  defp renew_game(_world, _zones, false, _timeout), do: :ok

  defp renew_game(world, zones, true, timeout) do
    case World.Game.renew(world, zones, timeout) do
      {:ok, _spec} -> :ok
      {:error, why} -> {:error, why}
    end
  end

  defp check_game(_spec, false), do: :ok

  defp check_game(%Spec{} = old, true) do
    new = Spec.renew!(old)

    if new.version != old.version and not function_exported?(old.module, :upgrade, 3),
      do:
        {:error,
         "#{inspect(old.module)}'s version went from #{old.version} to #{new.version}, " <>
           "and it has no upgrade/3 to bring the world's state along (see Grove.Game)"},
      else: :ok
  rescue
    error in ArgumentError ->
      {:error, "#{inspect(old.module)} is no longer a game: #{Exception.message(error)}"}
  end

  defp check_kinds(kinds, reloaded) do
    Enum.reduce_while(reloaded, :ok, fn module, :ok ->
      case kinds do
        %{^module => old_version} ->
          try do
            Grove.Actor.describe!(module)
            new_version = Grove.Actor.version(module)

            if new_version != old_version and not function_exported?(module, :upgrade, 2),
              do:
                {:halt,
                 {:error,
                  "#{inspect(module)}'s version went from #{old_version} to #{new_version}, " <>
                    "and it has no upgrade/2 to bring its actors' state along (see Grove.Actor)"}},
              else: {:cont, :ok}
          rescue
            error in ArgumentError -> {:halt, {:error, Exception.message(error)}}
          end

        _ ->
          {:cont, :ok}
      end
    end)
  end

  # The kinds the actors run, with the version their herds' states are of.
  defp actor_kinds(actors) do
    Grove.Actors.kinds(actors) |> Map.new(&{&1.module, &1.version})
  rescue
    ArgumentError -> %{}
  end
end
