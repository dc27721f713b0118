defmodule Grove.ClusterClient do
  @moduledoc """
  A client of a clustered world that lives on a node of the cluster and
  keeps the client contract, as a gateway session does: it owns one
  entity, moves it when asked and waits for the move's one outcome, and
  remembers the last cell it was told of. When a node is lost with the
  zone its entity stood in (`{:grove_lost, id}`), it places the entity
  again under the same id on that cell, or next to it, or anywhere
  (`Grove.Gateway.Session` does the same); it dies with its node.

  It is not linked to the test: a node killed under it must not take the
  test along. Each request waits for its answer while watching the
  client, so a client gone with its node answers `:down`.

  The code runs on the peers, which load it from the test node's code
  path: it lives in `test/support`, not in a test file.
  """

  alias Grove.World

  # Next to the last cell: as far as `Grove.Gateway.Session` looks.
  @near 2
  @wait 10_000

  @doc """
  Starts a client on `node` that joins `world` with `opts`; returns
  `{:ok, pid, id, cell}` or the join's error.
  """
  def start(node, world, opts) do
    pid = Node.spawn(node, __MODULE__, :init, [self(), world, opts])
    ref = Process.monitor(pid)

    receive do
      {:client, ^pid, {:ok, id, cell}} ->
        Process.demonitor(ref, [:flush])
        {:ok, pid, id, cell}

      {:client, ^pid, error} ->
        Process.demonitor(ref, [:flush])
        error

      {:DOWN, ^ref, :process, ^pid, reason} ->
        {:error, {:down, reason}}
    after
      @wait -> raise "the client on #{node} did not answer its join"
    end
  end

  @doc "Moves the entity one step; the move's outcome, or `:down`."
  def move(pid, direction), do: request(pid, {:move, direction})

  @doc "Takes the entity out of the world; the client then ends."
  def leave(pid), do: request(pid, :leave)

  @doc """
  What the client knows: `%{id:, cell:, restored:, failed:, paused:}`, the
  number of times it placed its entity again after a loss, the places
  that failed and the times it was told its node paused; or `:down`.
  """
  def info(pid), do: request(pid, :info)

  defp request(pid, request) do
    ref = Process.monitor(pid)
    send(pid, {:request, self(), ref, request})

    receive do
      {:reply, ^ref, reply} ->
        Process.demonitor(ref, [:flush])
        reply

      {:DOWN, ^ref, :process, ^pid, _reason} ->
        :down
    after
      @wait -> raise "the client #{inspect(pid)} did not answer #{inspect(request)}"
    end
  end

  @doc false
  def init(test, world, opts) do
    opts = Keyword.merge([kind: :player, updates: :none], opts)
    result = World.join(world, opts)
    send(test, {:client, self(), result})

    with {:ok, id, cell} <- result do
      loop(%{
        world: world,
        opts: Keyword.delete(opts, :at),
        id: id,
        cell: cell,
        restored: 0,
        failed: [],
        paused: 0
      })
    end
  end

  defp loop(%{id: id} = client) do
    receive do
      {:request, from, ref, {:move, direction}} ->
        tag = make_ref()
        :ok = World.move(client.world, id, direction, tag)
        {outcome, client} = await_outcome(client, tag)
        send(from, {:reply, ref, outcome})
        loop(client)

      {:request, from, ref, :leave} ->
        result = World.leave(client.world, id)
        send(from, {:reply, ref, result})
        if result != :ok, do: loop(client)

      {:request, from, ref, :info} ->
        send(from, {:reply, ref, Map.take(client, [:id, :cell, :restored, :failed, :paused])})
        loop(client)

      {:grove_lost, ^id} ->
        loop(restore(client))

      {:grove_paused, ^id} ->
        loop(%{client | paused: client.paused + 1})
    end
  end

  # The move's outcome; a loss told meanwhile is handled on the way.
  defp await_outcome(%{id: id} = client, tag) do
    receive do
      {:grove_move, ^id, ^tag, {:ok, cell} = outcome} -> {outcome, %{client | cell: cell}}
      {:grove_move, ^id, ^tag, outcome} -> {outcome, client}
      {:grove_lost, ^id} -> await_outcome(restore(client), tag)
      {:grove_paused, ^id} -> await_outcome(%{client | paused: client.paused + 1}, tag)
    end
  end

  defp restore(%{id: id, cell: {x, y} = cell} = client) do
    opts = Keyword.put(client.opts, :id, id)

    result =
      case World.join(client.world, Keyword.put(opts, :at, cell)) do
        {:ok, _id, _cell} = ok ->
          ok

        _taken ->
          area = {x - @near, y - @near, x + @near + 1, y + @near + 1}

          case World.join(client.world, Keyword.put(opts, :at, {:within, area})) do
            {:ok, _id, _cell} = ok -> ok
            _full -> World.join(client.world, opts)
          end
      end

    case result do
      {:ok, ^id, cell} -> %{client | cell: cell, restored: client.restored + 1}
      {:error, reason} -> %{client | failed: [reason | client.failed]}
    end
  end
end
