defmodule Mix.Tasks.Grove.Bench.Frames do
  @shortdoc "Compares JSON and binary frame sizes of real views, side by side"

  @moduledoc """
  Starts a world with actors and its gateway, connects players over
  WebSocket, records the `area` frames they receive for a while, and prints
  the sizes of snapshots and deltas in both encodings: every frame received
  as JSON is also encoded in binary (and the other way round), so both
  columns describe exactly the same messages.

      mix grove.bench.frames --actors 20000 --seconds 10

  Options: `--actors N` (default 20000), `--players N` (default 4),
  `--seconds S` (default 10), `--width`, `--height` (default 1000), `--port`
  (default any free one).
  """

  use Mix.Task

  alias Grove.WsClient
  alias Grove.Protocol

  @switches [
    actors: :integer,
    players: :integer,
    seconds: :integer,
    width: :integer,
    height: :integer,
    port: :integer
  ]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.frames")

    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    actors = Keyword.get(opts, :actors, 20_000)
    players = Keyword.get(opts, :players, 4)
    seconds = Keyword.get(opts, :seconds, 10)

    {:ok, _} =
      Grove.start_link(
        name: BenchFrames,
        world: [width: Keyword.get(opts, :width, 1000), height: Keyword.get(opts, :height, 1000)],
        actors: [count: actors],
        gateway: [port: Keyword.get(opts, :port, 0)],
        status_interval: false
      )

    wait_for_actors(actors)
    port = Grove.Gateway.port()

    Mix.shell().info(
      "#{actors} actors walking; recording views of #{players} players for #{seconds} s"
    )

    parent = self()

    for n <- 1..players do
      encoding = if rem(n, 2) == 0, do: :binary, else: :json
      spawn_link(fn -> record(port, encoding, seconds, parent) end)
    end

    samples = for _ <- 1..players, do: receive(do: ({:samples, s} -> s))
    report(List.flatten(samples), seconds, players)
  end

  defp wait_for_actors(count) do
    if Grove.Actors.joined(Grove.actors(BenchFrames)) < count do
      Process.sleep(200)
      wait_for_actors(count)
    end
  end

  # Joins, walks a little so the viewport changes too, and keeps every view.
  defp record(port, encoding, seconds, parent) do
    {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws?encoding=#{encoding}")
    send_message(client, encoding, %{type: :join, protocol: Protocol.version(), view_radius: 8})
    deadline = System.monotonic_time(:millisecond) + seconds * 1000
    samples = loop(client, encoding, deadline, 1, [])
    send(parent, {:samples, samples})
  end

  defp loop(client, encoding, deadline, seq, samples) do
    if System.monotonic_time(:millisecond) > deadline do
      samples
    else
      case WsClient.recv(client, 1000) do
        {:ok, {_kind, data}, client} ->
          {:ok, message} = Protocol.decode(data, encoding)
          samples = if message.type == :area, do: [sizes(message) | samples], else: samples

          # A step every ten frames or so, in a circle, to see recentred views too.
          if rem(length(samples) + 1, 10) == 0 do
            direction = Enum.at([:e, :s, :w, :n], rem(seq, 4))
            send_message(client, encoding, %{type: :move, seq: seq, dir: direction})
          end

          loop(client, encoding, deadline, seq + 1, samples)

        {:error, :timeout} ->
          loop(client, encoding, deadline, seq, samples)
      end
    end
  end

  defp sizes(message) do
    %{
      full: message.full,
      entities: length(message.entities) + length(message.gone),
      json: IO.iodata_length(Protocol.encode(message, :json)),
      binary: IO.iodata_length(Protocol.encode(message, :binary))
    }
  end

  defp send_message(client, encoding, message) do
    kind = if encoding == :json, do: :text, else: :binary

    :ok =
      WsClient.send_frame(client, {kind, IO.iodata_to_binary(Protocol.encode(message, encoding))})
  end

  defp report(samples, seconds, players) do
    Mix.shell().info("")

    Mix.shell().info(
      "| area | frames | entities per frame | JSON bytes | binary bytes | binary / JSON |"
    )

    Mix.shell().info("| --- | ---: | ---: | ---: | ---: | ---: |")

    for {label, full} <- [{"area snapshot", true}, {"area delta", false}] do
      group = Enum.filter(samples, &(&1.full == full))

      if group != [] do
        n = length(group)
        json = Enum.sum(Enum.map(group, & &1.json)) / n
        binary = Enum.sum(Enum.map(group, & &1.binary)) / n
        entities = Enum.sum(Enum.map(group, & &1.entities)) / n

        Mix.shell().info(
          "| #{label} | #{n} | #{Float.round(entities, 1)} | #{round(json)} | #{round(binary)} | #{Float.round(binary / json, 2)} |"
        )
      end
    end

    total_json = Enum.sum(Enum.map(samples, & &1.json))
    total_binary = Enum.sum(Enum.map(samples, & &1.binary))

    Mix.shell().info(
      "\nview bytes per player per second: JSON #{round(total_json / seconds / players)}, " <>
        "binary #{round(total_binary / seconds / players)} " <>
        "(binary / JSON #{Float.round(total_binary / max(total_json, 1), 2)})"
    )
  end
end
