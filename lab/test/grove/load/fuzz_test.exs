defmodule Grove.Load.FuzzTest do
  # Starts a gateway: Yaws runs one server per node, so not async.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias Grove.Load.Fuzz
  alias Grove.Protocol

  @moduletag :gateway

  setup_all do
    Grove.TestInstance.start!("fuzz",
      sqlite: true,
      # The game ticks only when told: its regrowth would change the layer
      # a test compares.
      world: [
        width: 40,
        height: 40,
        zone_size: 20,
        tick: :manual,
        game: {Grove.Games.Orchard, tick: :manual}
      ],
      actors: [count: 0],
      accounts: [password_cost: 1000, guests: true],
      gateway: [port: 0]
    )
  end

  test "hostile and mutated inputs at the front doors are all answered, and nothing is logged as an error",
       %{port: port} do
    # ExUnit's seed: another stream each run, the same again with --seed.
    seed = ExUnit.configuration()[:seed]

    {report, log} =
      with_log([level: :error], fn -> Fuzz.run("127.0.0.1", port, count: 400, seed: seed) end)

    assert report.rounds == 400
    assert report.seed == seed

    assert report.violations == [],
           "seed #{seed}: #{inspect(report.violations, pretty: true, charlists: :as_lists)}"

    assert log == ""
  end

  test "a game's actions that no game may take are refused with a reason and change nothing; floods are answered",
       %{port: port, world: world} do
    layer = fn -> for x <- 0..39, y <- 0..39, do: Grove.World.cell(world, {x, y}) end
    # The players of the other tests have left: one that picked apples
    # drops them as it goes.
    Grove.WorldCase.eventually(fn ->
      assert Grove.World.Audit.residents(Grove.World.fetch!(world)) == []
    end)

    before = layer.()

    report = Fuzz.run("127.0.0.1", port, count: 60, seed: 11, cases: [:ws_act_hostile])

    assert report.violations == [],
           inspect(report.violations, pretty: true, charlists: :as_lists)

    hostile = Map.keys(report.outcomes.ws_act_hostile)
    # Refused by the game's checks and by the protocol's.
    assert "acted unknown_action" in hostile and "acted bad_args" in hostile
    assert Enum.any?(hostile, &(&1 in ["error bad_field", "error bad_frame"]))
    assert layer.() == before

    report = Fuzz.run("127.0.0.1", port, count: 5, seed: 11, cases: [:ws_act_flood])

    assert report.violations == [],
           inspect(report.violations, pretty: true, charlists: :as_lists)

    assert Enum.all?(Map.keys(report.outcomes.ws_act_flood), &(&1 =~ ~r/^(acted|error) /))
  end

  test "a run is repeated exactly by its seed", %{port: port} do
    # Cases whose answers do not depend on the server's state (rate limits, accounts).
    cases = [:http_version, :ws_unmasked, :uri_huge, :content_length_garbage, :chunk_framing]
    first = Fuzz.run("127.0.0.1", port, count: 30, seed: 7, cases: cases)
    again = Fuzz.run("127.0.0.1", port, count: 30, seed: 7, cases: cases)
    assert first.cases == again.cases
    assert first.outcomes == again.outcomes
  end

  test "a server that does not answer is a violation" do
    # Listens, accepts, and never says a word.
    {:ok, listener} = :gen_tcp.listen(0, ip: {127, 0, 0, 1}, active: false)
    {:ok, port} = :inet.port(listener)
    holder = Task.async(fn -> hold(listener, []) end)

    report = Fuzz.run("127.0.0.1", port, count: 2, seed: 1, cases: [:http_version], deadline: 200)

    assert [%{case: :http_version, got: "silent"} | _] = report.violations
    assert Enum.any?(report.violations, &(&1.got =~ "/healthz afterwards"))

    # A report shows no token, not even the one the fuzzer signed itself.
    report =
      Fuzz.run("127.0.0.1", port, count: 1, seed: 1, cases: [:token_noncanonical], deadline: 200)

    assert [%{case: :token_noncanonical, input: input} | _] = report.violations
    assert input =~ "Authorization: Bearer <hidden>"
    refute input =~ ~r/[A-Za-z0-9_-]{22,}/
    Task.shutdown(holder, :brutal_kill)
    :gen_tcp.close(listener)
  end

  test "a report hides a token's whole value, whatever byte a mutation put in its middle" do
    token = "v1." <> String.duplicate("AbCdEfGhIjKl", 4) <> "." <> String.duplicate("MnOpQrSt", 4)
    middle = div(byte_size(token), 2)

    flip = fn bytes, byte ->
      {at, _} = :binary.match(bytes, token)
      <<head::binary-size(at + middle), _, tail::binary>> = bytes
      <<head::binary, byte, tail::binary>>
    end

    # Any eight of the token's bytes in a row, but its prefix.
    leaks = fn shown ->
      for at <- 3..(byte_size(token) - 8),
          window = binary_part(token, at, 8),
          String.contains?(shown, window),
          do: window
    end

    for byte <- [0, ?\r, ?\n, ?", ?,, ?}, ?\s, 0xFF] do
      request =
        "GET /api/me HTTP/1.1\r\nHost: grove\r\nAuthorization: Bearer #{token}\r\n" <>
          "Connection: close\r\n\r\n"

      shown = Fuzz.shown(%{kind: :http, input: flip.(request, byte)})
      assert leaks.(shown) == [], "#{inspect(<<byte>>)}: #{shown}"
      assert shown =~ "Bearer <hidden>\\r\\nConnection: close"

      for encoding <- [:json, :binary] do
        join = %{
          type: :join,
          protocol: Protocol.version(),
          view_radius: 8,
          name: "",
          token: token
        }

        payload = join |> Protocol.encode(encoding) |> IO.iodata_to_binary() |> flip.(byte)
        frame = :cow_ws.masked_frame({:binary, payload}, %{})
        shown = Fuzz.shown(%{kind: :ws, input: [frame]})
        assert leaks.(shown) == [], "#{encoding}, #{inspect(<<byte>>)}: #{shown}"
        # The payload is shown unmasked.
        if encoding == :json, do: assert(shown =~ ~S("type\":\"join\"))
      end
    end
  end

  test "a violation shows its input whole, and its replay sends that round alone again" do
    {:ok, listener} = :gen_tcp.listen(0, ip: {127, 0, 0, 1}, active: false)
    {:ok, port} = :inet.port(listener)
    holder = Task.async(fn -> hold(listener, []) end)
    opts = [seed: 5, cases: [:http_mutation], deadline: 200]

    report = Fuzz.run("127.0.0.1", port, [count: 2] ++ opts)
    assert [_ | _] = report.violations
    # Past the 50 bytes inspect shows of bytes that are not all text.
    assert Enum.any?(report.violations, &(byte_size(elem(Code.eval_string(&1.input), 0)) > 50))

    for violation <- report.violations do
      # An Elixir string of every byte sent, not inspect's first 50.
      {input, []} = Code.eval_string(violation.input)
      assert is_binary(input)
      assert violation.replay == %{seed: 5, count: violation.round, only: [violation.round]}

      again = Fuzz.run("127.0.0.1", port, Keyword.merge(opts, Map.to_list(violation.replay)))
      assert again.rounds == 1
      assert [%{round: round, input: shown} | _] = again.violations
      assert {round, shown} == {violation.round, violation.input}
    end

    Task.shutdown(holder, :brutal_kill)
    :gen_tcp.close(listener)
  end

  test "a replay that would send nothing is refused", %{port: port} do
    url = "http://127.0.0.1:#{port}"

    assert_raise Mix.Error, ~r/--seed/, fn ->
      Mix.Tasks.Grove.Load.run(~w(fuzz --url #{url} --count 5 --only 3))
    end

    assert_raise Mix.Error, ~r/--only 6 is past --count 5/, fn ->
      Mix.Tasks.Grove.Load.run(~w(fuzz --url #{url} --seed 3 --count 5 --only 6))
    end

    assert_raise ArgumentError, ~r/only rounds 1 to 5 run/, fn ->
      Fuzz.run("127.0.0.1", port, count: 5, seed: 3, only: [6])
    end

    # Its count is the round's, if not given.
    output =
      ExUnit.CaptureIO.capture_io(fn ->
        Mix.Tasks.Grove.Load.run(~w(fuzz --url #{url} --seed 3 --only 1500))
      end)

    assert output =~ "fuzz: 1 rounds, seed 3"
  end

  test "mix grove.load fuzz prints what the server answered, and fails on a violation", %{
    port: port
  } do
    output =
      ExUnit.CaptureIO.capture_io(fn ->
        Mix.Tasks.Grove.Load.run(~w(fuzz --url http://127.0.0.1:#{port} --count 20 --seed 3))
      end)

    assert output =~ "fuzz: 20 rounds, seed 3"
    assert output =~ ~r/http_mutation: .*x\d/

    {:ok, listener} = :gen_tcp.listen(0, ip: {127, 0, 0, 1}, active: false)
    {:ok, silent} = :inet.port(listener)
    holder = Task.async(fn -> hold(listener, []) end)

    errors =
      ExUnit.CaptureIO.capture_io(:stderr, fn ->
        ExUnit.CaptureIO.capture_io(fn ->
          assert catch_exit(
                   Mix.Tasks.Grove.Load.run(
                     ~w(fuzz --url http://fuzzer:s3cret@127.0.0.1:#{silent} --count 1 --deadline 100)
                   )
                 ) == {:shutdown, 1}
        end)
      end)

    assert errors =~ "violation in round 1"
    assert errors =~ "again: mix grove.load fuzz --url http://127.0.0.1:#{silent} --seed "
    assert errors =~ "--count 1 --only 1"
    # A URL's user and password are not printed.
    refute errors =~ "s3cret"
    Task.shutdown(holder, :brutal_kill)
    :gen_tcp.close(listener)
  end

  defp hold(listener, sockets) do
    case :gen_tcp.accept(listener) do
      {:ok, socket} -> hold(listener, [socket | sockets])
      {:error, _} -> :ok
    end
  end
end
