defmodule Grove.World.Zone.Bacteria do
  @moduledoc false
  # The zone's share of the bacteria (Grove.World.Life): it computes its own
  # cells of the automaton, one generation at a time, on a timer of its own,
  # and takes in the patterns players seed there. The functions take and
  # return the zone process's state; `Grove.World.Zone` calls them from its
  # callbacks (its `:generation` messages and `{:seed, ...}` casts).
  #
  # The zone publishes each generation's cells and borders in the world's
  # life table (one row per zone: `{zone, g, cells, borders of g, borders
  # of g - 1}`, owned by the keeper) and computes `g + 1` only once each of
  # its eight neighbours' rows holds generation `g` or `g + 1` (whose row
  # still has the borders of `g`). So neighbours are never more than one
  # generation apart, a zone needs no message from another, and one that
  # lags (busy, or restarting) holds up its neighbours, which poll its row,
  # rather than letting them compute from borders that do not exist yet. A
  # restarted zone carries on from its row. Generation `g` is due `g`
  # intervals after the world started, in every zone at once: a scheduler
  # woken once for all of them costs a fraction of one woken for each (see
  # docs/decisions.md); a zone that falls behind computes the generations
  # it owes one message at a time, so moves are served in between.

  alias Grove.{Metrics, World}
  alias Grove.World.{Entity, Grid, Life, Stats, Terrain, Zone}
  alias Grove.World.Life.Board
  alias Grove.World.Zone.{Handoff, State}

  # Milliseconds between two looks at the neighbours' rows while they lag.
  @life_retry 10
  # Cells a zone may hold seeded for its next generation.
  @max_seeds 256

  # The zone's cells of the automaton: from its row in the life table when
  # it restarts, else generation 0, a soup laid by the world's seed.
  @doc false
  @spec recover_life(Zone.t()) :: Zone.t()
  def recover_life(%Zone{world: %World{life: nil}} = zone), do: zone

  def recover_life(%Zone{world: world, index: index} = zone) do
    board = Board.new(zone.core.bounds)

    open =
      if world.rules.blocking,
        do: Board.open_where(board, fn x, y -> not Terrain.blocked?(zone.core.terrain, x, y) end),
        else: Board.open_all(board)

    zone = %{zone | life_open: open, neighbours: Life.neighbours(world.grid, index)}

    zone =
      case :ets.lookup(world.life_table, index) do
        [{^index, generation, bits, edges, _previous}] ->
          board = %{board | bits: bits}

          %{
            zone
            | core: State.put_bacteria(zone.core, board),
              generation: generation,
              live: Board.count(board),
              life_edges: edges
          }

        [] ->
          cells =
            Life.soup(world.life, world.terrain_options[:seed], zone.core.bounds, fn x, y ->
              Board.alive?(%{board | bits: open}, x, y) and not State.occupied?(zone.core, x, y)
            end)

          board = Board.put(board, cells)
          edges = Board.edges(board)
          :ets.insert(world.life_table, {index, 0, board.bits, edges, nil})
          for cell <- cells, do: add_life_density(zone, cell, 1)
          Stats.incr(world.stats, :bacteria, length(cells))

          %{
            zone
            | core: State.put_bacteria(zone.core, board),
              live: length(cells),
              life_edges: edges
          }
      end

    # A zone that restarts late owes generations: it catches up at once.
    advance_life(zone)
  end

  # Computes the generations that are due, one per message, as far as the
  # neighbours' rows allow.
  @doc false
  @spec advance_life(Zone.t()) :: Zone.t()
  def advance_life(%Zone{world: %World{life: nil}} = zone), do: zone

  def advance_life(zone) do
    if zone.generation >= life_target(zone) do
      schedule_generation(zone)
    else
      case halo(zone) do
        {:ok, halo} ->
          zone = next_generation(zone, halo)

          if zone.generation < life_target(zone) do
            # More are owed: after whatever waits in the mailbox.
            send(self(), :generation)
            %{zone | life_timer: make_ref()}
          else
            schedule_generation(zone)
          end

        :wait ->
          %{zone | life_timer: Process.send_after(self(), :generation, @life_retry)}
      end
    end
  end

  # The generation the world is due at: by the clock, or as far as manual
  # stepping has asked.
  defp life_target(%Zone{world: %World{life: %Life{interval: :manual}} = world}),
    do: :atomics.get(world.life_target, 1)

  defp life_target(%Zone{world: %World{life: %Life{interval: interval}} = world}) do
    elapsed = System.monotonic_time(:millisecond) - world.life_epoch
    if elapsed < 0, do: 0, else: div(elapsed, interval)
  end

  defp schedule_generation(%Zone{life_timer: nil, world: world} = zone) do
    case world.life do
      %Life{interval: :manual} ->
        zone

      %Life{interval: interval} ->
        due = world.life_epoch + (zone.generation + 1) * interval
        %{zone | life_timer: Process.send_after(self(), :generation, due, abs: true)}
    end
  end

  defp schedule_generation(zone), do: zone

  # The neighbours' borders of this zone's generation, or `:wait` while one
  # of them has not published it yet.
  defp halo(%Zone{generation: generation, world: world} = zone) do
    Enum.reduce_while(zone.neighbours, {:ok, %{}}, fn
      {_direction, nil}, acc ->
        {:cont, acc}

      {direction, neighbour}, {:ok, halo} ->
        case :ets.lookup(world.life_table, neighbour) do
          [{_, ^generation, _bits, edges, _previous}] ->
            {:cont, {:ok, Map.put(halo, direction, edges)}}

          [{_, ahead, _bits, _edges, previous}] when ahead == generation + 1 ->
            {:cont, {:ok, Map.put(halo, direction, previous)}}

          _ ->
            {:halt, :wait}
        end
    end)
  end

  # One generation: the rule, then the interaction with the world (no
  # birth under an entity; seeded cells where still free), then the row
  # that lets the neighbours go on.
  defp next_generation(%Zone{world: world, core: core} = zone, halo) do
    started = System.monotonic_time(:microsecond)
    board = core.bacteria
    {stepped, memo} = step(zone, board, halo)

    {next, born, died, edges} =
      if stepped.bits == board.bits and zone.seeds == [] do
        # Still life (or nothing at all): no cell changes, the borders stay.
        {board, [], [], zone.life_edges}
      else
        changes(zone, board, stepped)
      end

    generation = zone.generation + 1
    :ets.insert(world.life_table, {zone.index, generation, next.bits, edges, zone.life_edges})

    for cell <- born, do: add_life_density(zone, cell, 1)
    for cell <- died, do: add_life_density(zone, cell, -1)
    births = length(born)
    deaths = length(died)
    Stats.incr(world.stats, :generations)
    Stats.incr(world.stats, :births, births)
    Stats.incr(world.stats, :deaths, deaths)
    Stats.incr(world.stats, :bacteria, births - deaths)
    live = zone.live + births - deaths
    duration = System.monotonic_time(:microsecond) - started
    Grove.Metrics.Histogram.record(world.life_time, duration)

    Metrics.execute(
      [:grove, :life, :generation],
      %{duration: duration, births: births, deaths: deaths, live: live},
      %{zone: zone.index, world: world.name, generation: generation}
    )

    Zone.ensure_tick(%{
      zone
      | core: State.next_generation(core, next, born, died),
        generation: generation,
        live: live,
        life_edges: edges,
        life_memo: memo,
        seeds: []
    })
  end

  # The rule's step, remembered for the last two boards and borders it was
  # given: a still life, a blinker or an empty zone between quiet
  # neighbours gets the same two inputs over and over.
  defp step(%Zone{world: world, life_memo: memo} = zone, board, halo) do
    bits = board.bits

    case Enum.find(memo, fn {input, around, _output} -> input == bits and around == halo end) do
      {_input, _around, output} ->
        {%{board | bits: output}, memo}

      nil ->
        next = Board.step(board, world.life.rule, halo, zone.life_open)
        {next, [{bits, halo, next.bits} | Enum.take(memo, 1)]}
    end
  end

  # The interaction with the world: no birth under an entity, seeded cells
  # where still free; the cells born and dead, and the new borders.
  defp changes(%Zone{core: core} = zone, board, next) do
    born = Board.to_cells(next, Bitwise.band(next.bits, Bitwise.bnot(board.bits)))
    {under, born} = Enum.split_with(born, fn {x, y} -> State.occupied?(core, x, y) end)

    seeded =
      for {x, y} = cell <- Enum.uniq(zone.seeds),
          Board.alive?(%{next | bits: zone.life_open}, x, y),
          not Board.alive?(next, x, y),
          not State.occupied?(core, x, y),
          do: cell

    next = next |> Board.clear(under) |> Board.put(seeded)
    died = Board.to_cells(board, Bitwise.band(board.bits, Bitwise.bnot(next.bits)))
    {next, born ++ seeded, died, Board.edges(next)}
  end

  # A pattern seeded by a player in front of it: checked against the zone
  # as it is now, and put in at the next generation on the cells still free
  # then (the neighbours have the borders of this one already).
  @doc false
  @spec handle_seed(
          Zone.t(),
          Entity.id(),
          atom(),
          Grid.direction(),
          pid(),
          term(),
          non_neg_integer()
        ) ::
          Zone.t()
  def handle_seed(zone, id, pattern, direction, owner, tag, hops) do
    case State.fetch(zone.core, id) do
      {:ok, %Entity{owner: ^owner} = entity} ->
        case seed_check(zone, Life.pattern_cells(pattern, {entity.x, entity.y}, direction)) do
          {:ok, cells} ->
            Stats.incr(zone.world.stats, :seeds)
            send(owner, {:grove_seed, id, tag, :ok})
            %{zone | seeds: cells ++ zone.seeds}

          {:rejected, _reason} = rejected ->
            Stats.incr(zone.world.stats, :seeds_refused)
            send(owner, {:grove_seed, id, tag, rejected})
            zone
        end

      {:ok, %Entity{}} ->
        send(owner, {:grove_seed, id, tag, {:rejected, :not_owner}})
        zone

      :error ->
        case Handoff.follow(zone.core, id, hops, zone.locate) do
          {:ok, to} ->
            GenServer.cast(
              World.zone_address(zone.world, to),
              {:seed, id, pattern, direction, owner, tag, hops + 1}
            )

          :error ->
            send(owner, {:grove_seed, id, tag, {:rejected, :unknown_entity}})
        end

        zone
    end
  end

  defp seed_check(%Zone{world: world, core: core} = zone, cells) do
    pending = MapSet.new(zone.seeds)

    cond do
      zone.overloaded ->
        {:rejected, :busy}

      not Enum.all?(cells, fn {x, y} -> Grid.in_bounds?(world.grid, x, y) end) ->
        {:rejected, :out_of_bounds}

      not Enum.all?(cells, fn {x, y} -> State.inside?(core, x, y) end) ->
        {:rejected, :zone_edge}

      world.rules.blocking and
          Enum.any?(cells, fn {x, y} -> Terrain.blocked?(core.terrain, x, y) end) ->
        {:rejected, :blocked}

      Enum.any?(cells, fn {x, y} ->
        State.occupied?(core, x, y) or State.live?(core, x, y) or MapSet.member?(pending, {x, y})
      end) ->
        {:rejected, :occupied}

      length(zone.seeds) + length(cells) > @max_seeds ->
        {:rejected, :busy}

      true ->
        {:ok, cells}
    end
  end

  # Bacteria count on the minimap like entities, in a layer of their own.
  defp add_life_density(%Zone{world: world}, {x, y}, by) do
    block = world.density_block
    :atomics.add(world.life_density, div(y, block) * world.density_cols + div(x, block) + 1, by)
  end
end
