defmodule Grove.Gateway.SessionTilesTest do
  @moduledoc """
  A player's session against a running world cut into zones and view
  tiles: whatever the player and the entities around it do, once the world
  has ticked and the session has read, the areas the player was sent show,
  in its viewport, exactly the entities there, each once, none lost across
  tile and zone borders. In version 4, where the areas' parts read
  together go out in one `areas` frame, as in version 3, where each area
  is a frame of its own, in version 5, where a part places its
  entities from its area's corner (in a world whose east and south tiles
  are narrower than the others), and in version 6, where a delta leaves
  out the kind of an entity that was in its area already and an area's
  ground comes once a connection: each entity shown with its own kind;
  and in version 7, whose JSON spreads the parts in the `areas` message.
  """
  use ExUnit.Case, async: true

  import Grove.PropCase
  import Grove.WorldCase, only: [with_world: 2]

  alias Grove.Gateway.Session
  alias Grove.{Protocol, World}
  alias Grove.World.{Grid, Slots, View, Zone}

  @walkers 10
  @radius 3
  # Tiles out of the viewport by more than this many cells are closed.
  @margin 2

  defp command do
    dir = :proper_types.elements(Grid.directions())

    :proper_types.frequency([
      {4, {:step, dir}},
      {6, {:walk, :proper_types.integer(0, @walkers - 1), dir}},
      {3, :tick}
    ])
  end

  for encoding <- [:binary, :json], version <- [3, 4, 5, 6, 7] do
    test "the player sees in its viewport exactly what is there, each entity once (#{encoding}, version #{version})" do
      check(
        forall({:proper_types.integer(1, 1000), :proper_types.list(command())}, fn {seed,
                                                                                    commands} ->
          run(unquote(encoding), unquote(version), seed, commands)
        end),
        numtests: 25
      )
    end
  end

  test "the tiles a move brings into view are asked for with it: their snapshot comes before its outcome, and none is asked for after" do
    alone(fn name, session, dir ->
      {session, seq} = before_new_tiles(name, session, dir, 1)
      session = send_move(session, seq, dir)

      receive do
        {:grove_view, 0, :tiles, _seq, [_ | _]} = tiles ->
          assert_receive {:grove_move, _id, ^seq, {:ok, _cell}} = outcome
          {session, [_outcome]} = Session.handle_info(session, outcome)
          {_session, frames} = Session.views(session, [tiles])
          assert IO.iodata_length(frames) > 0
          :ok = Zone.recovered(World.fetch!(name), 0)
          refute_received {:grove_view, _zone, :tiles, _seq, _data}

        {:grove_move, _id, ^seq, _outcome} ->
          flunk("the outcome came before the tiles it brought into view")
      end
    end)
  end

  test "a move sent while another is in flight asks for no tiles ahead of it" do
    alone(fn name, session, dir ->
      {session, seq} = before_new_tiles(name, session, dir, 1)

      # A move still in flight (its outcome not yet read): the next one,
      # which would bring tiles into view from the confirmed cell, asks
      # for none before it goes.
      session = %{session | in_flight: Map.put(session.in_flight, 0, {0, nil, dir})}
      _session = send_move(session, seq, dir)
      assert_receive {:grove_move, _id, ^seq, {:ok, _cell}}
      refute_received {:grove_view, _zone, :tiles, _seq, _data}
    end)
  end

  test "a move refused before it goes, its zone busy, asks for no tiles ahead of it; the next that goes does" do
    alone(fn name, session, dir ->
      {session, seq} = before_new_tiles(name, session, dir, 1)

      # The zone's mailbox as last measured past its limit: the move that
      # would bring tiles into view is refused here, and never goes.
      world = World.fetch!(name)
      :ok = Slots.put_load(world, 0, world.mailbox_limit + 1)
      session = send_move(session, seq, dir)
      assert_receive {:grove_move, _id, ^seq, {:rejected, :busy}} = outcome
      {session, _actions} = Session.handle_info(session, outcome)
      :ok = Zone.recovered(world, 0)
      refute_received {:grove_view, _zone, :tiles, _seq, _data}

      # Measured short again: the same step goes, its tiles asked for with it.
      :ok = Slots.put_load(world, 0, 0)
      assert unheld?(World.grid(name), session, dir)
      next = seq + 1
      _session = send_move(session, next, dir)
      assert_receive {:grove_view, 0, :tiles, _seq, [_ | _]}
      assert_receive {:grove_move, _id, ^next, {:ok, _cell}}
    end)
  end

  test "a zone watched again while the views wait for two moves, there and back: every tile in view where the player ends is asked for" do
    alone(fn name, session, dir ->
      grid = World.grid(name)
      {session, seq} = before_tiles_left(name, session, dir, 1)
      a = session.cell
      b = Grid.step(a, dir)
      left = Grid.view_tiles(grid, a, @radius) -- Grid.view_tiles(grid, b, @radius)
      assert left != []

      # To B and back, the second sent while the first is in flight (so
      # it asks for no tiles ahead), and the views not read in between.
      session = send_move(session, seq, dir)
      session = send_move(session, seq + 1, back(dir))
      assert_receive {:grove_move, _id, ^seq, {:ok, ^b}} = there
      assert_receive {:grove_move, _id, _seq, {:ok, ^a}} = again
      {session, _actions} = Session.handle_info(session, there)

      # The zone restarts while the player stands at B: it is watched
      # again with the tiles in view of B alone.
      {session, _actions} = Session.handle_info(session, {:grove_view, 0, :closed})
      {session, []} = Session.handle_info(session, {:grove_view, 0, :subscribed, 0})
      assert Enum.all?(left, &(not is_map_key(session.areas[0], &1)))

      {session, _actions} = Session.handle_info(session, again)
      {session, _frames} = Session.views(session)

      for tile <- Grid.view_tiles(grid, a, @radius),
          do: assert(is_map_key(session.areas[0], tile), "tile #{tile} in view, not asked for")
    end)
  end

  # Runs `walk` with the name of a world of one zone of 30 x 30 cells in
  # tiles of 5, with nothing in the way, a session joined to it with
  # every view message read, and a way to walk from its cell that stays
  # in the world a while: east from the zone's west half, west from its
  # east half.
  defp alone(walk) do
    with_world([width: 30, height: 30, zone_size: 30, view_tile: 5], fn name ->
      session = Session.new(name, :binary, Grove.SessionConfig.loose(), 0)
      join = Protocol.encode(%{type: :join, protocol: 7, view_radius: @radius}, :binary)
      {session, _actions} = Session.handle_frame(session, :binary, bin(join), 0)
      session = quiet(name, session)
      {x, _y} = session.cell
      walk.(name, session, if(x < 15, do: :e, else: :w))
    end)
  end

  # Steps in `dir` while a step brings no tiles into view; returns the
  # session where the next step would, and the next move's number.
  defp before_new_tiles(name, session, dir, seq) do
    step_while(name, session, dir, seq, &(not unheld?(World.grid(name), &1, dir)))
  end

  # Steps in `dir` while a step leaves every tile in view; returns the
  # session where the next step would leave some, and the next move's number.
  defp before_tiles_left(name, session, dir, seq) do
    grid = World.grid(name)

    step_while(name, session, dir, seq, fn session ->
      to = Grid.step(session.cell, dir)
      Grid.view_tiles(grid, session.cell, @radius) -- Grid.view_tiles(grid, to, @radius) == []
    end)
  end

  # Steps in `dir`, each to its outcome and quiet after it, while `go_on?`
  # holds of the session; returns the session and the next move's number.
  defp step_while(name, session, dir, seq, go_on?) do
    if go_on?.(session) do
      session = send_move(session, seq, dir)
      assert_receive {:grove_move, _id, ^seq, {:ok, _cell}} = outcome
      {session, _actions} = Session.handle_info(session, outcome)
      step_while(name, quiet(name, session), dir, seq + 1, go_on?)
    else
      {session, seq}
    end
  end

  defp back(:e), do: :w
  defp back(:w), do: :e

  # The move numbered `seq` in `dir`, sent as the player's: the session,
  # which has nothing to send back at once.
  defp send_move(session, seq, dir) do
    move = bin(Protocol.encode(%{type: :move, seq: seq, dir: dir}, :binary))
    {session, []} = Session.handle_frame(session, :binary, move, 0)
    session
  end

  # Whether a step brings into view a tile the session holds not (a tile
  # left behind stays held within the view's margin: a step back to it
  # asks for nothing).
  defp unheld?(grid, session, dir) do
    to = Grid.step(session.cell, dir)

    Grid.tile_span(grid, to, @radius) != Grid.tile_span(grid, session.cell, @radius) and
      Enum.any?(Grid.view_tiles(grid, to, @radius), fn tile ->
        not is_map_key(Map.get(session.areas, Grid.tile_zone(grid, tile), %{}), tile)
      end)
  end

  # The session with every view message its zones sent it taken, and read.
  defp quiet(name, session, rounds \\ 5) do
    :ok = Zone.recovered(World.fetch!(name), 0)

    {session, taken} =
      Stream.repeatedly(fn ->
        receive do
          {:grove_view, _, _, _, _} = message -> message
          {:grove_view, _, _, _} = message -> message
          {:grove_view, _, _} = message -> message
        after
          0 -> nil
        end
      end)
      |> Enum.take_while(& &1)
      |> Enum.reduce({session, 0}, fn message, {session, n} ->
        {session, _actions} = Session.handle_info(session, message)
        {session, n + 1}
      end)

    {session, _frames} = Session.views(session)
    if taken == 0 or rounds == 0, do: session, else: quiet(name, session, rounds - 1)
  end

  defp run(encoding, version, seed, commands) do
    # 30 x 30 cells in nine zones of 10, each cut into four tiles of 5;
    # in version 5, 32 x 31: the tiles at the east and south edges are
    # 2 cells wide and 1 high.
    {width, height} = if version >= 5, do: {32, 31}, else: {30, 30}

    [width: width, height: height, zone_size: 10, view_tile: 5, seed: seed]
    |> with_world(fn name ->
      :rand.seed(:exsss, {seed, seed, seed})

      # Of kinds 3 to 5: each must be shown with its own.
      walkers =
        for k <- 1..@walkers do
          {:ok, id, _cell} = World.join(name, updates: :none, kind: 3 + rem(k, 3))
          id
        end

      config = Map.put(Grove.SessionConfig.loose(), :view_margin, @margin)
      session = Session.new(name, encoding, config, 0)
      join = Protocol.encode(%{type: :join, protocol: version, view_radius: @radius}, encoding)
      {session, actions} = Session.handle_frame(session, kind(encoding), bin(join), 0)

      st = %{
        kinds: Map.new(Enum.with_index(walkers, 1), fn {id, k} -> {id, 3 + rem(k, 3)} end),
        world: name,
        encoding: encoding,
        version: version,
        session: session,
        view: nil,
        walkers: List.to_tuple(walkers),
        grounds: %{},
        # Snapshots kept for the next read, as a moving player's connection
        # keeps them (Grove.Gateway.Connection): half of them, at random.
        held: [],
        seq: 0,
        tag: 0
      }

      st = apply_actions(st, actions)
      st = settle(st)
      check!(st)
      st = Enum.reduce(commands, st, &step/2)
      check!(settle(tick(st)))
      true
    end)
  end

  defp kind(:binary), do: :binary
  defp kind(:json), do: :text

  defp bin(iodata), do: IO.iodata_to_binary(iodata)

  defp step({:step, dir}, st) do
    seq = st.seq + 1
    move = Protocol.encode(%{type: :move, seq: seq, dir: dir}, st.encoding)
    {session, actions} = Session.handle_frame(st.session, kind(st.encoding), bin(move), 0)
    st = apply_actions(%{st | session: session, seq: seq}, actions)
    id = st.view.self
    # Its outcome, through the session, as the connection would hand it.
    assert_receive {:grove_move, ^id, ^seq, _outcome} = outcome
    {session, actions} = Session.handle_info(st.session, outcome)
    apply_actions(%{st | session: session}, actions)
  end

  defp step({:walk, k, dir}, st) do
    id = elem(st.walkers, k)
    tag = {:walk, st.tag + 1}
    :ok = World.move(st.world, id, dir, tag)
    assert_receive {:grove_move, ^id, ^tag, _outcome}
    %{st | tag: st.tag + 1}
  end

  defp step(:tick, st), do: st |> tick() |> settle() |> check!()

  defp tick(st) do
    :ok = World.tick(st.world)
    st
  end

  # Until nothing more comes: every zone has handled what was sent to it
  # (a call to each comes after), the session has handled every message
  # from the zones and read the feed, and asked for nothing new.
  defp settle(st, rounds \\ 12) do
    world = World.fetch!(st.world)
    for index <- 0..(Grid.zone_count(world.grid) - 1), do: :ok = Zone.recovered(world, index)
    {st, handled} = drain(st, 0)
    {session, frames} = Session.views(st.session, Enum.reverse(st.held))
    st = apply_frames(%{st | session: session, held: []}, frames)

    cond do
      handled == 0 and IO.iodata_length(frames) == 0 and rounds < 12 -> st
      rounds == 0 -> flunk("the session never settled")
      true -> settle(st, rounds - 1)
    end
  end

  defp drain(st, handled) do
    receive do
      {:grove_view, _, :tiles, _, _} = message -> drain(tiles(st, message), handled + 1)
      {:grove_view, zone, _, _} = message -> drain(handle(unhold(st, zone), message), handled + 1)
      {:grove_view, zone, _} = message -> drain(handle(unhold(st, zone), message), handled + 1)
    after
      0 -> {st, handled}
    end
  end

  defp tiles(st, message) do
    if :rand.uniform(2) == 1,
      do: %{st | held: [message | st.held]},
      else: handle(st, message)
  end

  # A zone closed or watched again: the snapshots it sent before, held, are dropped.
  defp unhold(st, zone), do: %{st | held: Enum.reject(st.held, &(elem(&1, 1) == zone))}

  defp handle(st, message) do
    {session, actions} = Session.handle_info(st.session, message)
    apply_actions(%{st | session: session}, actions)
  end

  defp apply_actions(st, actions) do
    Enum.reduce(actions, st, fn {:send, frames}, st -> apply_frames(st, frames) end)
  end

  # The frames as a client reads them: the areas assembled as
  # `Grove.World.View` does (as the JavaScript client does), centred on
  # the cell of the latest outcome.
  defp apply_frames(st, frames) do
    messages =
      for payload <- frames |> bin() |> parse([]) do
        {:ok, message} = Protocol.decode(payload, st.encoding, st.version)
        message
      end

    joined!(st.version, messages)
    Enum.reduce(messages, st, &client(&2, &1))
  end

  # Version 4 joins the parts a session sends at once: never two `areas`
  # one after the other, and no `area` (this world has no game); version 3
  # has no `areas`.
  defp joined!(version, messages) when version >= 4 do
    types = Enum.map(messages, & &1.type)
    refute :area in types, "an area of its own in version 4: #{inspect(types)}"

    for [:areas, :areas] <- Enum.chunk_every(types, 2, 1),
        do: flunk("two areas frames in a row: #{inspect(types)}")
  end

  defp joined!(3, messages), do: refute(Enum.any?(messages, &(&1.type == :areas)))

  defp parse(<<>>, acc), do: Enum.reverse(acc)

  defp parse(<<_fin_op, 126, size::16, payload::binary-size(size), rest::binary>>, acc),
    do: parse(rest, [payload | acc])

  defp parse(<<_fin_op, 127, size::64, payload::binary-size(size), rest::binary>>, acc),
    do: parse(rest, [payload | acc])

  defp parse(<<_fin_op, 0::1, size::7, payload::binary-size(size), rest::binary>>, acc),
    do: parse(rest, [payload | acc])

  defp client(st, %{type: :welcome} = welcome),
    do: %{st | view: View.new({welcome.x, welcome.y}, @radius, welcome.id)}

  defp client(st, %{type: :outcome, x: x, y: y}), do: %{st | view: View.recenter(st.view, {x, y})}

  defp client(st, %{type: :area, full: true} = area),
    do: %{st | view: View.put_area(st.view, area.area, area.entities)}

  defp client(st, %{type: :area} = area),
    do: %{st | view: View.update_area(st.view, area.area, area.entities, area.gone)}

  # From version 5 on, a part's entities are placed from its area's
  # corner, which its ground gives.
  # From version 6 on, it comes once a connection: the client keeps it.
  defp client(st, %{type: :ground} = ground) do
    if st.version >= 6 and is_map_key(st.grounds, ground.area),
      do: flunk("area #{ground.area}'s ground sent twice")

    %{st | grounds: Map.put(st.grounds, ground.area, {ground.x, ground.y, ground.width})}
  end

  # From version 6 on, a delta's entity that was in its area already
  # comes without its kind: the area showed it, and the client keeps it.
  defp client(%{version: version} = st, %{type: :areas, areas: parts}) when version >= 6 do
    Enum.reduce(parts, st, fn {area, full, entities, gone}, st ->
      {x0, y0, width} = Map.fetch!(st.grounds, area)
      mirror = Map.get(st.view.mirrors, area, %{})

      placed =
        for {id, at, kind} <- entities do
          kind =
            case {kind, mirror} do
              {nil, %{^id => {_x, _y, kind}}} ->
                kind

              {nil, _} ->
                flunk("area #{area} moved #{id} without its kind, never having shown it")

              {kind, _} ->
                kind
            end

          {id, x0 + rem(at, width), y0 + div(at, width), kind}
        end

      client(st, %{type: :area, area: area, full: full, entities: placed, gone: gone})
    end)
  end

  defp client(%{version: 5} = st, %{type: :areas, areas: parts}) do
    Enum.reduce(parts, st, fn {area, full, entities, gone}, st ->
      {x0, y0, width} = Map.fetch!(st.grounds, area)

      placed =
        for {id, at, kind} <- entities, do: {id, x0 + rem(at, width), y0 + div(at, width), kind}

      client(st, %{type: :area, area: area, full: full, entities: placed, gone: gone})
    end)
  end

  defp client(st, %{type: :areas, areas: parts}) do
    Enum.reduce(parts, st, fn {area, full, entities, gone}, st ->
      client(st, %{type: :area, area: area, full: full, entities: entities, gone: gone})
    end)
  end

  defp client(st, %{type: :area_closed, area: area}),
    do: %{st | view: View.drop_area(st.view, area)}

  defp client(st, _message), do: st

  defp check!(st) do
    grid = World.grid(st.world)
    view = st.view
    ids = [view.self | Tuple.to_list(st.walkers)]

    truth =
      for id <- ids,
          {x, y} = World.position(st.world, id),
          into: %{},
          do: {id, {x, y}}

    assert truth[view.self] == view.center, "the player stands where its outcomes say"

    # Each area held shows exactly what is in its tile: none stale, none
    # missing, so none twice.
    for {area, mirror} <- view.mirrors do
      shown = Map.new(mirror, fn {id, {x, y, _kind}} -> {id, {x, y}} end)

      for {id, {_x, _y, kind}} <- mirror,
          do: assert(kind == Map.get(st.kinds, id, 1), "area #{area} shows #{id} as kind #{kind}")

      inside =
        for {id, {x, y} = cell} <- truth,
            Grid.tile_of(grid, x, y) == area,
            into: %{},
            do: {id, cell}

      assert shown == inside, "area #{area} shows #{inspect(shown)}, holds #{inspect(inside)}"
    end

    # Every tile the viewport overlaps is held: so every entity in view is seen.
    for tile <- Grid.view_tiles(grid, view.center, @radius),
        do: assert(Map.has_key?(view.mirrors, tile), "tile #{tile} in view, not held")

    # Every tile the session holds, and every area the client shows, lies
    # within the viewport's span with its margin: those the viewport left
    # are closed, none kept for good.
    {c0, c1, r0, r1} = Grid.tile_span(grid, view.center, @radius + @margin)
    held = for {_zone, tiles} <- st.session.areas, tile <- Map.keys(tiles), do: tile

    for tile <- held ++ Map.keys(view.mirrors) do
      {col, row} = {rem(tile, grid.tiles_x), div(tile, grid.tiles_x)}
      assert col in c0..c1 and row in r0..r1, "tile #{tile} held, out of the viewport's margin"
    end

    visible = for {id, {x, y, _kind}} <- View.visible(view), into: %{}, do: {id, {x, y}}

    in_view =
      for {id, cell} <- truth,
          Grid.in_view?(view.center, @radius, cell),
          into: %{},
          do: {id, cell}

    assert visible == in_view
    st
  end
end
