import argparse

import pytest

from benchrunner import frameworks, models, results
from benchrunner import workload as workload_module
from benchrunner.models import llama as llama_models
from benchrunner.workload import Workload


def owner(key: str) -> str | None:
    """The first framework a setting belongs to; None for a setting every framework shares."""
    return (frameworks.owners_of(key) or (None,))[0]


def tf(**values) -> Workload:
    """A TensorFlow workload with settings of either kind, built as given (no preset filled in, no type check)."""
    settings = {key: value for key, value in values.items() if owner(key)}
    common = {key: value for key, value in values.items() if key not in settings}
    return Workload(**common, settings=frameworks.get(frameworks.DEFAULT).Settings(**settings))


def parse(argv: list[str]) -> Workload:
    parser = argparse.ArgumentParser()
    workload_module.add_arguments(parser)
    return Workload.from_args(parser.parse_args(argv))


@pytest.mark.parametrize("workload", [
    Workload(),
    tf(model="resnet50", batch_size=64, image_size=224, precision="mixed_float16", xla=True),
    Workload(model="densenet121_chexnet", data="tfrecord", data_dir="/data/cxr", warmup_steps=1,
             measured_steps=100, learning_rate=0.001),
    tf(fusion_threshold_mb=0, cycle_time_ms=2.5, fp16_allreduce=True, hierarchical_allreduce=True),
])
def test_options_round_trip_through_the_command_line(workload):
    assert parse(workload.to_argv()) == workload


def test_defaults_need_no_options():
    assert Workload().to_argv() == []


@pytest.mark.parametrize(("changes", "message"), [
    ({"model": "resnet9000"}, "model 'resnet9000' is not one of"),
    ({"data": "images"}, "data 'images' needs a data directory"),
    ({"data": "csv", "data_dir": "/x"}, "data 'csv' is not one of synthetic, images, tfrecord"),
    ({"precision": "fp8"}, "precision 'fp8' is not one of"),
    ({"batch_size": 0}, "batch size and measured steps must be >= 1"),
    ({"warmup_steps": 0}, "warmup steps must be >= 1"),
    ({"image_size": 4}, "image size 4 is below the 8 px small_cnn accepts"),
    ({"model": "resnet50", "image_size": 31}, "image size 31 is below the 32 px resnet50 accepts"),
    ({"model": "inception_v3", "image_size": 64}, "image size 64 is below the 75 px inception_v3 accepts"),
    ({"learning_rate": 0.0}, r"learning rate must be a finite number > 0 \(got 0.0\)"),
    ({"learning_rate": float("nan")}, r"learning rate must be a finite number > 0 \(got nan\)"),
    ({"learning_rate": float("inf")}, r"learning rate must be a finite number > 0 \(got inf\)"),
    ({"cycle_time_ms": 0.0}, r"cycle time must be a number > 0 and at most 1000 ms \(got 0.0\)"),
    ({"cycle_time_ms": float("nan")}, r"cycle time must be a number > 0 and at most 1000 ms \(got nan\)"),
    ({"cycle_time_ms": float("inf")}, r"cycle time must be a number > 0 and at most 1000 ms \(got inf\)"),
    ({"cycle_time_ms": 1000.5}, r"cycle time must be a number > 0 and at most 1000 ms \(got 1000.5\)"),
    ({"fusion_threshold_mb": -1}, r"fusion threshold must be from 0 to 1024 MiB \(got -1\)"),
    ({"fusion_threshold_mb": 1025}, r"fusion threshold must be from 0 to 1024 MiB \(got 1025\)"),
])
def test_invalid_settings_are_named(changes, message):
    with pytest.raises(ValueError, match=message):
        tf(**changes).validate()


def test_horovod_knobs_become_horovods_environment():
    assert Workload().settings.horovod_environment() == {}
    assert tf(fusion_threshold_mb=64, cycle_time_ms=3.5, hierarchical_allreduce=True).settings.horovod_environment() == {
        "HOROVOD_FUSION_THRESHOLD": str(64 * 1024 * 1024), "HOROVOD_CYCLE_TIME": "3.5",
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}


def test_real_data_and_chexnet_are_multi_label_with_fourteen_findings():
    assert Workload().classes == 10 and not Workload().multi_label
    assert Workload(model="densenet121_chexnet").classes == 14
    assert Workload(data="images", data_dir="/d").record()["num_classes"] == 14


def test_unknown_settings_in_a_mapping_are_named():
    with pytest.raises(ValueError, match="unknown workload settings: steps"):
        Workload.from_mapping({"model": "small_cnn", "steps": 10})


# A valid value other than the default for every workload setting: a new setting without one fails here.
NON_DEFAULT = {
    "model": "resnet50", "data": "tfrecord", "data_dir": "/data/cxr", "batch_size": 64, "image_size": 224,
    "num_classes": 1000, "precision": "mixed_bfloat16", "xla": True, "warmup_steps": 3, "measured_steps": 7,
    "learning_rate": 0.1, "preset": "horovod_synthetic", "optimizer": "adam", "momentum": 0.5, "lr_scaling": "none",
    "lr_schedule": "cosine", "lr_warmup_steps": 2, "cache": "memory", "prefetch_to_device": True,
    "num_parallel_calls": 4, "interleave_cycle_length": 8, "fusion_threshold_mb": 32, "cycle_time_ms": 1.5,
    "fp16_allreduce": True, "hierarchical_allreduce": True,
    "compile": True, "channels_last": True, "dataloader_workers": 0, "pin_memory": False,
    "activation_checkpointing": "full", "reshard_after_forward": False, "hsdp": True,
    "sequence_length": 2048, "gradient_accumulation_steps": 4, "weight_decay": 0.1,
}
# The settings that shape a text model's input are tested on one.
TEXT_MODEL = "llama-tiny"


def home(key: str) -> dict[str, str]:
    """A framework (and, for a text model's setting, a model) that takes the setting."""
    model = {"model": TEXT_MODEL} if key in workload_module.KIND_SETTINGS["text"] else {}
    return {"framework": owner(key) or frameworks.DEFAULT if not model else "pytorch-ddp", **model}


def test_every_setting_has_a_non_default_value_to_test_with():
    assert sorted(NON_DEFAULT) == sorted(workload_module.option_names())
    for key, value in NON_DEFAULT.items():
        assert Workload(**home(key)).record()[key] != value


@pytest.mark.parametrize("key", sorted(NON_DEFAULT))
def test_every_setting_round_trips_through_argv_and_a_mapping(key):
    workload = Workload.from_mapping({key: NON_DEFAULT[key], **home(key)})
    assert workload.record()[key] == NON_DEFAULT[key]
    assert parse(workload.to_argv()) == workload
    kind_settings = {"num_classes": workload.num_classes} if workload.kind == "image" else {}
    assert Workload.from_mapping({**workload.record(), **kind_settings}) == workload


@pytest.mark.parametrize("framework", frameworks.names())
def test_a_setting_of_the_other_framework_is_refused_naming_the_key_and_its_framework(framework):
    # A setting of another framework that this one does not share (PyTorch's frameworks share most of theirs).
    key = next(key for other in frameworks.names() if other != framework for key in frameworks.setting_names(other)
               if framework not in frameworks.owners_of(key))
    owners = " and ".join(frameworks.owners_of(key))
    with pytest.raises(ValueError, match=f"workload setting {key} belongs to {owners}, not to this job's framework "
                                         f"{framework}"):
        Workload.from_mapping({"framework": framework, key: NON_DEFAULT[key]})


def test_all_settings_at_once_round_trip():
    values = {key: value for key, value in NON_DEFAULT.items()
              if set(frameworks.owners_of(key)) <= {frameworks.DEFAULT} and key != "sequence_length"}
    values.update(preset=None, lr_scaling="linear", optimizer="adamw")
    workload = Workload.from_mapping(values)
    workload.validate()
    assert parse(workload.to_argv()) == workload


@pytest.mark.parametrize(("values", "message"), [
    ({"batch_size": "32"}, r"batch_size must be an integer \(got '32', a string\)"),
    ({"batch_size": True}, r"batch_size must be an integer \(got True, a boolean\)"),
    ({"batch_size": 32.0}, r"batch_size must be an integer \(got 32.0, a number\)"),
    ({"xla": "true"}, r"xla must be true or false \(got 'true', a string\)"),
    ({"xla": 1}, r"xla must be true or false \(got 1, an integer\)"),
    ({"learning_rate": "0.1"}, r"learning_rate must be a number \(got '0.1', a string\)"),
    ({"momentum": None}, r"momentum must be a number \(got None, null\)"),
    ({"data_dir": 5}, r"data_dir must be a string or null \(got 5, an integer\)"),
    ({"num_parallel_calls": 2.5}, r"num_parallel_calls must be an integer or a string \(got 2.5, a number\)"),
    ({"prefetch_to_device": "yes"}, "prefetch_to_device must be true or false"),
    ({"cache": ["memory"]}, r"cache must be a string or null \(got \['memory'\], list\)"),
])
def test_a_mapping_with_a_value_of_the_wrong_type_is_refused_naming_key_and_type(values, message):
    with pytest.raises(ValueError, match=message):
        Workload.from_mapping(values)


def test_a_whole_number_for_a_float_setting_is_kept_as_a_float():
    workload = Workload.from_mapping({"learning_rate": 1, "momentum": 0})
    assert type(workload.learning_rate) is float and type(workload.momentum) is float


def test_validate_names_wrong_types_before_judging_ranges():
    with pytest.raises(ValueError, match="batch_size must be an integer"):
        Workload(batch_size="32").validate()


@pytest.mark.parametrize(("changes", "message"), [
    ({"optimizer": "lamb"}, "optimizer 'lamb' is not one of sgd, adam"),
    ({"momentum": -0.1}, r"momentum must be a number >= 0 and < 1 \(got -0.1\)"),
    ({"momentum": 1.0}, r"momentum must be a number >= 0 and < 1 \(got 1.0\)"),
    ({"momentum": float("nan")}, r"momentum must be a number >= 0 and < 1 \(got nan\)"),
    ({"lr_scaling": "sqrt"}, "lr scaling 'sqrt' is not one of linear, none"),
    ({"lr_schedule": "step"}, "lr schedule 'step' is not one of constant, cosine"),
    ({"lr_warmup_steps": -1}, r"lr warmup steps must be >= 0 \(got -1\)"),
    ({"lr_warmup_steps": 110}, "lr warmup of 110 steps leaves none of the run's 110 steps after it"),
    ({"lr_warmup_steps": 5, "lr_scaling": "none"}, "with lr scaling none there is nothing to ramp"),
    ({"preset": "tf_cnn_benchmarks"}, "preset 'tf_cnn_benchmarks' is not one of horovod_synthetic"),
    ({"preset": "horovod_synthetic"},
     r"preset horovod_synthetic disagrees with momentum 0.9 \(the preset's is 0.0\), lr_scaling 'linear' "
     r"\(the preset's is 'none'\): drop the preset or those settings"),
    ({"num_parallel_calls": 0}, r"num parallel calls must be 'autotune' or an integer from 1 to 256 per rank \(got 0\)"),
    ({"num_parallel_calls": "auto"},
     r"num parallel calls must be 'autotune' or an integer from 1 to 256 per rank \(got 'auto'\)"),
    ({"data": "images", "data_dir": "/d", "num_parallel_calls": 1000000},
     r"num parallel calls must be 'autotune' or an integer from 1 to 256 per rank \(got 1000000\)"),
    ({"interleave_cycle_length": -1},
     r"interleave cycle length must be 'autotune' or an integer from 1 to 256 per rank \(got -1\)"),
    ({"data": "tfrecord", "data_dir": "/d", "interleave_cycle_length": 257},
     r"interleave cycle length must be 'autotune' or an integer from 1 to 256 per rank \(got 257\)"),
    ({"data": "images", "data_dir": "/d", "cache": "cache"},
     r"cache must be 'memory' or an absolute folder \(got 'cache'\)"),
    ({"cache": "memory", "prefetch_to_device": True},
     "cache, prefetch_to_device tune the input pipeline of real data; synthetic data has none"),
    ({"data": "images", "data_dir": "/d", "interleave_cycle_length": 4}, "tfrecord data only"),
    ({"data": "tfrecord", "data_dir": "/d", "interleave_cycle_length": 2, "num_parallel_calls": 3},
     "num parallel calls 3 exceeds the interleave cycle length 2"),
])
def test_invalid_training_and_pipeline_settings_are_named(changes, message):
    with pytest.raises(ValueError, match=message):
        tf(**changes).validate()


def test_the_horovod_preset_fills_in_the_peers_settings_and_is_recorded():
    workload = Workload.from_mapping({"preset": "horovod_synthetic", "model": "resnet50", "image_size": 224})
    workload.validate()
    # Horovod 0.28.1 tensorflow2_synthetic_benchmark.py: tf.optimizers.SGD(0.01), Keras's default momentum 0.
    assert (workload.optimizer, workload.momentum, workload.learning_rate) == ("sgd", 0.0, 0.01)
    assert (workload.lr_scaling, workload.lr_schedule, workload.lr_warmup_steps) == ("none", "constant", 0)
    assert workload.record()["preset"] == "horovod_synthetic"
    assert parse(["--preset", "horovod_synthetic", "--model", "resnet50", "--image-size", "224"]) == workload


def test_a_setting_given_beside_a_preset_must_agree_with_it_even_when_it_is_the_default():
    for workload in (Workload.from_mapping({"preset": "horovod_synthetic", "momentum": 0.9}),
                     parse(["--preset", "horovod_synthetic", "--momentum", "0.9"])):
        with pytest.raises(ValueError, match=r"preset horovod_synthetic disagrees with momentum 0.9"):
            workload.validate()
    Workload.from_mapping({"preset": "horovod_synthetic", "momentum": 0}).validate()


def test_autotune_or_a_number_on_the_command_line():
    assert parse(["--num-parallel-calls", "autotune"]).settings.num_parallel_calls == "autotune"
    assert parse(["--num-parallel-calls", "6"]).settings.num_parallel_calls == 6
    with pytest.raises(SystemExit):
        parse(["--num-parallel-calls", "many"])


def test_records_made_before_a_setting_existed_read_as_benchrunner_then_ran():
    # v2: the version whose results were written before these settings were recorded.
    schema = results.schema(results.RANK_RESULT, 2)["$defs"]["workload"]
    before = {**workload_module.BEFORE_RECORDED, **frameworks.get(frameworks.DEFAULT).BEFORE_RECORDED}
    # Exactly the settings older v2 results may lack, each with what benchrunner did before it; the others a
    # result may lack are the settings of a framework it did not train with.
    optional = set(schema["properties"]) - set(schema["required"])
    not_tensorflow = {key for key in optional if owner(key) not in (None, frameworks.DEFAULT)}
    assert sorted(before) == sorted(optional - not_tensorflow - {"xla", "fusion_threshold_mb", "cycle_time_ms",
                                                                 "fp16_allreduce", "hierarchical_allreduce"})
    old = {key: value for key, value in Workload().record().items() if key not in before}
    completed = workload_module.complete_record(old)
    assert (completed["optimizer"], completed["momentum"], completed["lr_scaling"]) == ("sgd", 0.9, "linear")
    assert Workload.from_mapping(completed) == Workload()


def ddp(**values) -> Workload:
    """A PyTorch DDP workload (a framework that builds text models) with the settings as given."""
    return Workload(**values, framework="pytorch-ddp")


def test_a_text_model_is_refused_by_a_framework_that_builds_no_text_model_naming_those_that_do():
    builders = models.frameworks_for(TEXT_MODEL)
    assert builders and frameworks.DEFAULT not in builders
    with pytest.raises(ValueError, match=f"llama-tiny is a text model, which {frameworks.DEFAULT} does not build: "
                                         f"use {' or '.join(builders)}"):
        Workload(model=TEXT_MODEL).validate()
    ddp(model=TEXT_MODEL).validate()


@pytest.mark.parametrize(("changes", "message"), [
    ({"model": TEXT_MODEL, "image_size": 224},
     "image_size shapes image models' input; llama-tiny is a text model: leave it out"),
    ({"model": TEXT_MODEL, "image_size": 224, "num_classes": 1000},
     "image_size, num_classes shape image models' input; llama-tiny is a text model: leave them out"),
    ({"model": "resnet50", "sequence_length": 512},
     "sequence_length shapes text models' input; resnet50 is an image model: leave it out"),
    ({"model": "resnet50", "data": "tokens", "data_dir": "/data/tokens"},
     "data 'tokens' feeds text models; resnet50 is an image model: use data 'synthetic' or 'images' or 'tfrecord'"),
    ({"model": TEXT_MODEL, "data": "images", "data_dir": "/data/cxr"},
     "data 'images' feeds image models; llama-tiny is a text model: use data 'synthetic' or 'tokens'"),
    ({"model": TEXT_MODEL, "sequence_length": 0}, r"sequence length must be from 1 to 1048576 tokens \(got 0\)"),
    ({"model": TEXT_MODEL, "sequence_length": 8192}, "sequence length 8192 is longer than the 4096 tokens llama-tiny "
                                                     "takes"),
    ({"model": TEXT_MODEL, "gradient_accumulation_steps": 0},
     r"gradient accumulation steps must be from 1 to 4096 \(got 0\)"),
])
def test_settings_of_the_other_kind_and_impossible_sequences_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        ddp(**changes).validate()


def test_the_longest_sequence_a_text_model_takes_is_accepted():
    ddp(model=TEXT_MODEL, sequence_length=llama_models.config(TEXT_MODEL).max_seq_len).validate()


def test_a_step_of_a_text_model_is_batch_times_accumulation_times_sequence_length_tokens():
    text = ddp(model=TEXT_MODEL, batch_size=4, gradient_accumulation_steps=3, sequence_length=128)
    text.validate()
    assert (text.kind, text.unit, text.units_per_step()) == ("text", "tokens", 4 * 3 * 128)
    image = ddp(model="resnet50", batch_size=32, gradient_accumulation_steps=2)
    assert (image.kind, image.unit, image.units_per_step()) == ("image", "images", 64)


def test_each_kind_records_its_own_input_settings_alone():
    text = ddp(model=TEXT_MODEL, sequence_length=128).record()
    assert text["sequence_length"] == 128 and "image_size" not in text and "num_classes" not in text
    image = ddp(model="resnet50").record()
    assert "sequence_length" not in image and (image["image_size"], image["num_classes"]) == (32, 10)
